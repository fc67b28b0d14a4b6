"""What the training-loop measurement (advisor/sweep.py) measured: its slices, and per count
the median and spread that the num_workers rules decide on. Plain data: no torch."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

STEP_NONE, STEP_SLEEP, STEP_SPIN = "none", "sleep", "spin"


@dataclass(frozen=True)
class LoaderPoint:
    """One slice of the training-loop measurement: one num_workers, one step mode."""

    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    samples: int
    seconds: float
    samples_per_s: float
    mb_per_s: float
    time_to_first_batch_s: float  # from the slice's start (a fresh loader's: its start-up)
    peak_worker_rss_mb: float
    # CPU seconds the main (training) thread spent per sample on loading, in the steady window:
    # with 0 workers all of the loader's Python work, with workers receiving the batches. None:
    # not measured, or a spinning step (whose spin is no loading).
    main_cpu_s_per_sample: float | None = None
    # Busy CPU seconds per sample of the cores this process may use, in the steady window (all
    # processes': the loader's, its readers', a local storage server's). None: not measured, or
    # a spinning step (whose spin is no loading).
    machine_cpu_s_per_sample: float | None = None
    # False: the slice ended before a steady window held enough batches, so the rate counts
    # start-up (or the batches that waited) too and is only a lower bound.
    steady: bool = True
    step: str = STEP_NONE  # how the consumer's step cost the host in this slice


@dataclass(frozen=True)
class StepRate:
    """One count under one step model: the median of its slices (the steady ones, or all of
    them where none was steady: a lower bound) and their range."""

    step: str
    median: float
    low: float
    high: float
    lower_bound: bool
    slices: int

    @property
    def noise(self) -> float:
        """Half the range: how far a slice strays from the median."""
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class CountRate:
    """What training saw from one num_workers over its slices, per step model (`steps`).

    `median`, `low`-`high` and `lower_bound` are those of its slower step model: what the
    tables show as the count's figure.
    """

    num_workers: int
    steps: tuple[StepRate, ...]

    @property
    def slower(self) -> StepRate:
        return min(self.steps, key=lambda s: s.median)

    @property
    def median(self) -> float:
        return self.slower.median

    @property
    def low(self) -> float:
        return self.slower.low

    @property
    def high(self) -> float:
        return self.slower.high

    @property
    def lower_bound(self) -> bool:
        return self.slower.lower_bound

    @property
    def step(self) -> str:
        return self.slower.step

    @property
    def slices(self) -> int:
        return sum(s.slices for s in self.steps)

    def at(self, step: str) -> StepRate | None:
        return next((s for s in self.steps if s.step == step), None)


def summarise(points: Sequence[LoaderPoint]) -> tuple[CountRate, ...]:
    """One CountRate per num_workers measured in `points`, a StepRate per step model."""
    rates: list[CountRate] = []
    for workers in sorted({p.num_workers for p in points}):
        mine = [p for p in points if p.num_workers == workers and p.samples_per_s > 0]
        steps = []
        for step in dict.fromkeys(p.step for p in mine):
            slices = [p for p in mine if p.step == step]
            kept = [p.samples_per_s for p in slices if p.steady]
            bound = not kept
            kept = kept or [p.samples_per_s for p in slices]
            steps.append(StepRate(
                step, statistics.median(kept), min(kept), max(kept), bound, len(slices)
            ))  # fmt: skip
        if steps:
            rates.append(CountRate(workers, tuple(steps)))
    return tuple(rates)

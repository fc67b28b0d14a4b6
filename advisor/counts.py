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
    # not measured.
    main_cpu_s_per_sample: float | None = None
    # False: the slice ended before a steady window held enough batches, so the rate counts
    # start-up (or the batches that waited) too and is only a lower bound.
    steady: bool = True
    step: str = STEP_NONE  # how the consumer's step cost the host in this slice


@dataclass(frozen=True)
class CountRate:
    """What training saw from one num_workers over its slices.

    `median` is the lower of its step modes' medians (over the steady slices of each mode, or
    all of them where none was steady); `low`-`high` is the spread behind it: the range of that
    mode's slices, or of all the count's slices where that mode has only one.
    """

    num_workers: int
    median: float
    low: float
    high: float
    lower_bound: bool  # the mode behind `median` reached no steady state: the count is faster
    step: str  # the step mode behind `median`
    mode_medians: tuple[tuple[str, float], ...]
    slices: int

    @property
    def noise(self) -> float:
        """Half the spread: how far a slice of this count strays from its median."""
        return (self.high - self.low) / 2


def summarise(points: Sequence[LoaderPoint]) -> tuple[CountRate, ...]:
    """One CountRate per num_workers measured in `points` (see CountRate)."""
    rates: list[CountRate] = []
    for workers in sorted({p.num_workers for p in points}):
        mine = [p for p in points if p.num_workers == workers and p.samples_per_s > 0]
        if not mine:
            continue
        used: dict[str, list[float]] = {}
        steady: dict[str, bool] = {}
        for mode in dict.fromkeys(p.step for p in mine):
            slices = [p for p in mine if p.step == mode]
            kept = [p for p in slices if p.steady] or slices
            used[mode] = [p.samples_per_s for p in kept]
            steady[mode] = kept[0].steady
        medians = {mode: statistics.median(r) for mode, r in used.items()}
        worse = min(medians, key=lambda mode: medians[mode])
        spread = used[worse] if len(used[worse]) > 1 else [r for rs in used.values() for r in rs]
        rates.append(CountRate(
            workers, medians[worse], min(spread), max(spread), not steady[worse], worse,
            tuple(medians.items()), len(mine),
        ))  # fmt: skip
    return tuple(rates)

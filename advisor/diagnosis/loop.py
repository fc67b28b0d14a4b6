"""Diagnose the loader a user already has, and put two loaders side by side in one loop.

`advisor.diagnose(loader, step=...)` runs any iterable of batches (usually the user's own
DataLoader, never modified) in a training loop for a bounded number of batches or seconds and
reports how long each step waited for data, the time to the first batch, the headspace (the
loop's rate with loading free), the loader's CPU per sample, the peak memory of its processes and
GPU utilisation where there is a GPU, each figure with its spread, and the loop judged as every
front judges it (`advisor.decide.judge`): the verdict, the bottleneck, what the loader trips
over and one change with its predicted rate.

`advisor.compare(before, after, step=...)` runs two loaders through the same step, interleaved
round by round (before, after, then after, before, ...), so drift on a shared machine falls on
both alike: before, after, and the ratio with its spread over the rounds.

People read both through `advisor.report.diagnosis`: a diagnosis a figure a line, a comparison's
headline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from advisor.core.bounds import CompareRounds, LoopLimits, range_of
from advisor.core.workload import STEP_TIME_S, Workload
from advisor.decide.judge import JudgedLoop, judge
from advisor.decide.judged import Comparison, Diagnosis
from advisor.measure.hardware.host import usable_cores
from advisor.measure.loop.results import LoopRun
from advisor.measure.loop.run import (
    LoaderSource,
    LoopEvent,
    PacedStep,
    Step,
    batch_samples,
    run_loop,
)
from advisor.measure.loop.watch import LoaderFacts

__all__ = ["Comparison", "Diagnosis", "as_step", "compare", "diagnose", "judged"]


def as_step(
    step: Step | None = None,
    *,
    seconds_per_batch: float | None = None,
    consumer_rate: float | None = None,
    samples_of: Callable[[Any], int] = batch_samples,
    spins: bool = False,
) -> Step:
    """The loop's step from exactly one of: the user's callable (called with each batch), a fixed
    number of seconds per batch, or a consumer rate in samples/s; the last two as a GPU step
    that blocks, or that spins as CUDA's default synchronisation does (`spins`: its core kept
    busy, `PacedStep`)."""
    given = [v for v in (step, seconds_per_batch, consumer_rate) if v is not None]
    if len(given) != 1:
        raise ValueError(
            "give exactly one step: step=a callable taking a batch, seconds_per_batch=S or "
            f"consumer_rate=SAMPLES_PER_S (got {len(given)})"
        )
    if step is not None:
        if not callable(step):
            raise TypeError(f"step must be a callable taking a batch, got {type(step).__name__}")
        return step
    if seconds_per_batch is not None:
        if seconds_per_batch not in STEP_TIME_S:
            raise ValueError(f"{seconds_per_batch=} must be {STEP_TIME_S}")
        return PacedStep(seconds=seconds_per_batch, spins=spins)
    rate = range_of(Workload, "consumer_rate")
    if consumer_rate not in rate:
        raise ValueError(f"{consumer_rate=} must be {rate}")
    return PacedStep(samples_per_s=consumer_rate, spins=spins, samples_of=samples_of)


def diagnose(
    loader: LoaderSource,
    step: Step | None = None,
    *,
    seconds_per_batch: float | None = None,
    consumer_rate: float | None = None,
    limits: LoopLimits | None = None,
    label: str = "your loader",
    samples_of: Callable[[Any], int] = batch_samples,
    progress: Callable[[LoopEvent], None] | None = None,
    cancel: threading.Event | None = None,
) -> Diagnosis:
    """Run `loader` in a training loop whose step is `step` (or a fixed time, or a consumer
    rate) within `limits`, and say whether the loop waits for its data.

    Raises `advisor.measure.loop.run.LoaderError` (its subclasses name the case) for a loader
    that raises, yields nothing, or yields no batch within the limits' timeouts.
    """
    chosen = as_step(
        step, seconds_per_batch=seconds_per_batch, consumer_rate=consumer_rate,
        samples_of=samples_of,
    )  # fmt: skip
    return judged(*run_loop(
        loader, chosen, limits, label=label, samples_of=samples_of, progress=progress,
        cancel=cancel,
    ))  # fmt: skip


def judged(run: LoopRun, facts: LoaderFacts | None) -> JudgedLoop:
    """The loop as every front judges it (`advisor.decide.judge`), every step of it: the loop
    ran to its limits, so there is no later step to wait for. The loader is what the loop
    iterated: a loader given as a function is known by what it made."""
    handover = facts.handover() if facts is not None else None
    return judge(run, facts, usable_cores(), min_steps=1, handover=handover)


def compare(
    before: LoaderSource,
    after: LoaderSource,
    step: Step | None = None,
    *,
    seconds_per_batch: float | None = None,
    consumer_rate: float | None = None,
    limits: LoopLimits | None = None,
    rounds: int = 2,
    labels: tuple[str, str] = ("your loader", "recommended"),
    samples_of: Callable[[Any], int] = batch_samples,
    progress: Callable[[LoopEvent], None] | None = None,
    cancel: threading.Event | None = None,
) -> Comparison:
    """`before` and `after` through the same step, `rounds` times each, alternating which goes
    first. Each is re-iterable (a DataLoader: every round starts a fresh epoch) or a function
    that makes a loader (called at the start of every round)."""
    CompareRounds(rounds)  # raises ValueError naming the range
    chosen = as_step(
        step, seconds_per_batch=seconds_per_batch, consumer_rate=consumer_rate,
        samples_of=samples_of,
    )  # fmt: skip
    results: dict[int, list[JudgedLoop]] = {0: [], 1: []}
    loaders = (before, after)
    for r in range(rounds):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            measured = run_loop(
                loaders[which], chosen, limits, label=labels[which], samples_of=samples_of,
                progress=progress, cancel=cancel,
            )  # fmt: skip
            results[which].append(judged(*measured))
    return Comparison(tuple(results[0]), tuple(results[1]))

"""Diagnose the loader a user already has, and put two loaders side by side in one loop.

`advisor.diagnose(loader, step=...)` runs any iterable of batches (usually the user's own
DataLoader, never modified) in a training loop for a bounded number of batches or seconds and
reports how long each step waited for data, the time to the first batch, the headspace (the
loop's rate with loading free), the loader's CPU per sample, the peak memory of its processes and
GPU utilisation where there is a GPU, each figure with its spread, and a one-line verdict.

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
from advisor.decide.bottleneck import of_loop
from advisor.decide.judged import Comparison, Diagnosis
from advisor.decide.verdict import input_bound
from advisor.measure.hardware.host import MachineBusy, usable_cores
from advisor.measure.loop.results import LoopRun, LoopSummary
from advisor.measure.loop.run import (
    LoaderSource,
    LoopEvent,
    Step,
    batch_samples,
    rate_step,
    run_loop,
    sleep_step,
)

__all__ = ["Comparison", "Diagnosis", "as_step", "compare", "diagnose"]


def as_step(
    step: Step | None = None,
    *,
    seconds_per_batch: float | None = None,
    consumer_rate: float | None = None,
    samples_of: Callable[[Any], int] = batch_samples,
) -> Step:
    """The loop's step from exactly one of: the user's callable (called with each batch), a fixed
    number of seconds per batch, or a consumer rate in samples/s (a GPU step that blocks)."""
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
        return sleep_step(seconds_per_batch)
    rate = range_of(Workload, "consumer_rate")
    if consumer_rate not in rate:
        raise ValueError(f"{consumer_rate=} must be {rate}")
    assert consumer_rate is not None
    return rate_step(consumer_rate, samples_of)


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
    with MachineBusy() as machine:
        run = run_loop(
            loader, chosen, limits, label=label, samples_of=samples_of, progress=progress,
            cancel=cancel,
        )  # fmt: skip
    return _judged(run, machine.share)


def _judged(run: LoopRun, machine_busy: float | None) -> Diagnosis:
    """The run's summary with its verdict and its bottleneck. The loader's processes are read
    from what the loop iterated: a loader given as a function is known by what it made."""
    summary = LoopSummary.of(run)
    share = summary.overall_wait_share
    verdict = None if share is None else input_bound(share, summary.wait_share)
    limit = of_loop(summary, usable_cores(), run.loader_workers, machine_busy)
    return Diagnosis(summary, verdict, limit)


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
    results: dict[int, list[Diagnosis]] = {0: [], 1: []}
    loaders = (before, after)
    for r in range(rounds):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            with MachineBusy() as machine:
                run = run_loop(
                    loaders[which], chosen, limits, label=labels[which], samples_of=samples_of,
                    progress=progress, cancel=cancel,
                )  # fmt: skip
            results[which].append(_judged(run, machine.share))
    return Comparison(tuple(results[0]), tuple(results[1]))

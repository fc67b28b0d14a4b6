"""What one instrumented training loop measured (`LoopRun`), and its summary with spreads
(`LoopSummary`). Plain data: no torch."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

WINDOWS = 5  # the steady batches are cut into this many consecutive windows for a spread


@dataclass(frozen=True)
class Spread:
    """A median with the lowest and highest of the values it was taken over (`n` of them)."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(statistics.median(values), min(values), max(values), len(values))

    @classmethod
    def over(cls, values: Sequence[float]) -> Spread:
        """For a table of repeated runs: NaN values (failed runs) are left out, and no values
        give n=0 with NaN figures (`show` prints "-") where `of` gives None."""
        clean = [v for v in values if not math.isnan(v)]
        if not clean:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(statistics.median(clean), min(clean), max(clean), len(clean))

    def show(self, fmt: str) -> str:
        """The median and its range, "median (low-high)", in `fmt` (a str.format pattern); the
        median alone where the range would print as one value, "-" where there were none."""
        if self.n == 0:
            return "-"
        if self.n == 1 or fmt.format(self.low) == fmt.format(self.high):
            return fmt.format(self.median)
        return f"{fmt.format(self.median)} ({fmt.format(self.low)}-{fmt.format(self.high)})"

    def relative_width(self) -> float:
        """(high - low) / median: how far apart the runs are, as a share of the median."""
        return (self.high - self.low) / self.median if self.median else 0.0


@dataclass(frozen=True)
class LoopRun:
    """Every batch of one instrumented loop: how long the loop blocked waiting for it, how long
    its step took, and how many samples it held.

    time_to_first_batch_s: from asking the loader for an iterator to holding the first batch
        (worker start-up included); the first batch is not in `wait_s`.
    ended: "batches" or "seconds" (a limit), "epoch" (the loader ran out), "cancelled".
    cpu_s: CPU seconds of this process and its descendants (the loader's workers) over the
        loop, the step's included. peak_rss_bytes: the largest total resident set of that tree
        at one reading (its processes' summed; `TreeMeter`).
    gpu_utilization: NVML samples (percent) during the loop; empty without a GPU.
    others_cores: cores that other work (not this process tree) kept busy over the loop, on
        the cores this process may use (`InstrumentedLoop.others_cores`); None: not measured.
    """

    label: str
    time_to_first_batch_s: float
    first_batch_samples: int
    wait_s: tuple[float, ...]
    step_s: tuple[float, ...]
    samples: tuple[int, ...]
    ended: str
    cpu_s: float
    peak_rss_bytes: int
    gpu_utilization: tuple[int, ...] = ()
    replay_step_s: tuple[float, ...] = ()  # the same step on batches already loaded
    replay_samples: tuple[int, ...] = ()
    replay_cpu_s: float = 0.0
    notes: tuple[str, ...] = field(default=())
    # the CPU of the loop's steps: the training thread's, timed in the loop (`watch`: the
    # user's own steps, which are not replayed), or the replay's per batch (`diagnose`)
    step_cpu_s: float | None = None
    others_cores: float | None = None
    # the training thread's CPU getting its batches (from a step's end to the next arrival):
    # with workers, taking their batches over
    fetch_cpu_s: float | None = None
    # a loop iterated once per epoch (`watch`): the index in `wait_s` of each later epoch's
    # first batch (the first epoch's is `time_to_first_batch_s`)
    epoch_starts: tuple[int, ...] = ()

    @property
    def batches(self) -> int:
        return len(self.wait_s) + 1

    @property
    def total_samples(self) -> int:
        return self.first_batch_samples + sum(self.samples)

    def epoch_start_waits(self, batches: int) -> list[tuple[float, ...]]:
        """Per epoch, the waits for its first `batches` batches (fewer where it had fewer)."""
        ends = [*self.epoch_starts, len(self.wait_s)]
        firsts = [(self.time_to_first_batch_s, *self.wait_s[: min(batches - 1, ends[0])])]
        for start, end in zip(self.epoch_starts, ends[1:], strict=True):
            firsts.append(self.wait_s[start : min(start + batches, end)])
        return firsts

    def windows(self) -> list[tuple[float, float, int]]:
        """(waited, stepped, samples) per consecutive window of the batches after the first."""
        n = len(self.wait_s)
        if n == 0:
            return []
        return [
            (sum(self.wait_s[a:b]), sum(self.step_s[a:b]), sum(self.samples[a:b]))
            for a, b in window_bounds(n)
        ]


@dataclass(frozen=True)
class LoopSummary:
    """A loop as a person reads it, every rate with its spread over the loop's windows.

    overall_samples_per_s: samples over the time spent waiting and stepping, over the whole run
        after the first batch: the rate training ran at. samples_per_s: the same per window (its
        spread).
    overall_wait_share: the share of the loop's time spent blocked waiting for data ("exposed
        data loading time"), over the whole run after the first batch; wait_share: per window.
    wait_per_batch_s: per batch, over the batches after the first.
    headspace_samples_per_s: the same step replayed on batches already loaded: the loop's rate
        if loading were free. None: no batch to replay.
    loader_cpu_s_per_sample: the process tree's CPU over the loop less what the step cost in the
        replay, per sample. None: not measurable (no replay).
    """

    label: str
    batches: int
    samples: int
    seconds: float
    overall_samples_per_s: float | None
    overall_wait_share: float | None
    samples_per_s: Spread | None
    wait_share: Spread | None
    wait_per_batch_s: Spread | None
    step_s: Spread | None
    time_to_first_batch_s: float
    headspace_samples_per_s: Spread | None
    loader_cpu_s_per_sample: float | None
    peak_rss_bytes: int
    gpu_utilization: Spread | None
    ended: str
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: LoopRun) -> LoopSummary:
        windows = run.windows()
        rates = [s / (w + t) for w, t, s in windows if w + t > 0]
        shares = [w / (w + t) for w, t, _ in windows if w + t > 0]
        replay = [
            s / t for s, t in zip(run.replay_samples, run.replay_step_s, strict=True) if t > 0
        ]
        waited, stepped = sum(run.wait_s), sum(run.step_s)
        looped = waited + stepped
        return cls(
            label=run.label,
            batches=run.batches,
            samples=run.total_samples,
            seconds=run.time_to_first_batch_s + sum(run.wait_s) + sum(run.step_s),
            overall_samples_per_s=sum(run.samples) / looped if looped > 0 else None,
            overall_wait_share=waited / looped if looped > 0 else None,
            samples_per_s=Spread.of(rates),
            wait_share=Spread.of(shares),
            wait_per_batch_s=Spread.of(list(run.wait_s)),
            step_s=Spread.of(list(run.step_s)),
            time_to_first_batch_s=run.time_to_first_batch_s,
            headspace_samples_per_s=Spread.of(_windowed(replay)),
            loader_cpu_s_per_sample=_loader_cpu(run),
            peak_rss_bytes=run.peak_rss_bytes,
            gpu_utilization=Spread.of([float(u) for u in run.gpu_utilization]),
            ended=run.ended,
            notes=run.notes,
        )


def window_bounds(n: int) -> list[tuple[int, int]]:
    """[start, end) of up to WINDOWS consecutive, non-empty windows over `n` items."""
    count = min(WINDOWS, n)
    if count == 0:
        return []
    edges = [round(i * n / count) for i in range(count + 1)]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


def _windowed(rates: list[float]) -> list[float]:
    """Per-batch replay rates grouped into up to WINDOWS windows (mean of each)."""
    return [statistics.fmean(rates[a:b]) for a, b in window_bounds(len(rates))]


def _loader_cpu(run: LoopRun) -> float | None:
    """The tree's CPU over the loop less the step's (its replay CPU per batch, times the loop's
    batches), per sample; where the loop timed its steps' CPU itself, that."""
    if run.step_cpu_s is not None and run.total_samples > 0:
        return max(run.cpu_s - run.step_cpu_s, 0.0) / run.total_samples
    if not run.replay_step_s or run.total_samples == 0:
        return None
    step_cpu = run.replay_cpu_s / len(run.replay_step_s) * run.batches
    return max(run.cpu_s - step_cpu, 0.0) / run.total_samples

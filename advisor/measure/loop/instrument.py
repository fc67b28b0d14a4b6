"""The one instrumented training loop: what every loop that measures a loader records, whoever
drives it. `diagnose` and `compare` drive it from the advisor's loop (`run_loop`), `watch` from
the user's own (`WatchedLoop`), and the trial's sweep from its slices (`measure_slice`), so a
wait, a step, a sample and a worker's CPU count the same in all of them.

The driver tells it the loop's events: `start()` before the loader is asked for its first
batch, `arrived(batch)` when a batch reaches the step, `stepped()` when the step ends, `stop()`
at the end; `resumed()` where the driver's own work after a step (a progress report, a
framework's logging) is no part of the next batch's wait, and `stepping()` where its own work on
a batch (the trial's window and counts) comes before the step proper and is no part of the
step's CPU. Per step it reads two clocks (the wall clock and the training thread's CPU clock)
and appends three numbers. The process tree is read by `TreeMeter` on this thread at a batch's
arrival, at most every `READ_PERIOD_S`, outside both the wait and the step's time. NVML's GPU
utilisation is sampled in a thread of its own, where asked for.

`mark()` takes the loop at the last arrival (its clocks, the CPU its completed steps took, the
cores' busy CPU and, where asked, the tree): the trial's steady window reads its figures from
two marks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from advisor.measure.hardware.host import busy_cpu_s, cpu_seconds
from advisor.measure.hardware.nvml import GpuUtilization
from advisor.measure.hardware.processes import READ_PERIOD_S, TreeMeter, TreeSample
from advisor.measure.loop.results import LoopRun


def batch_samples(batch: Any) -> int:
    """Samples in one batch: a tensor's (or array's) first dimension; a dict's first value's; a
    tuple or list whose first item is a batched tensor (images, labels) counts that tensor's
    rows; any other list or tuple (a list of samples) its length; anything else one sample."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 0 else 1
    if isinstance(batch, Mapping):
        return batch_samples(next(iter(batch.values()))) if batch else 0
    if isinstance(batch, (list, tuple)) and batch:
        first = getattr(batch[0], "shape", None)
        leading = [getattr(item, "shape", (None,))[:1] for item in batch]
        if first is not None and len(first) > 0 and all(lead == first[:1] for lead in leading):
            return int(first[0]) if len(batch) <= 4 else len(batch)
        return len(batch)
    return 1


@dataclass(frozen=True)
class Mark:
    """The loop at its last batch's arrival (at its start, before any).

    wall_s: time.perf_counter() at the arrival. thread_cpu_s: the training thread's CPU clock
    then. step_cpu_s: that thread's CPU in the steps completed before it (each from its start,
    `stepping()`, else from its batch's arrival, to its end: a spinning step's spin).
    busy_cpu_s: the busy CPU of the cores this process may use, read at the mark, at `read_s`
    (time.perf_counter()), with `served_cpu_s` in it. served_cpu_s: the CPU of the loop's
    `servers` (a loopback endpoint's processes that a CPU quota's reading leaves out). tree:
    the tree's reading at the mark (`TreeMeter.read`), where one was asked for.
    """

    wall_s: float
    thread_cpu_s: float
    step_cpu_s: float
    busy_cpu_s: float
    read_s: float
    tree: TreeSample | None = None
    served_cpu_s: float = 0.0

    def loader_cpu_s(self, earlier: Mark) -> float:
        """The training thread's CPU between the two arrivals outside the steps: taking the
        batches from the loader (with 0 workers, making them) and the loop's own work."""
        return max(self.thread_cpu_s - earlier.thread_cpu_s - self.steps_cpu_s(earlier), 0.0)

    def steps_cpu_s(self, earlier: Mark) -> float:
        return self.step_cpu_s - earlier.step_cpu_s


class InstrumentedLoop:
    """The record of one loop: per step after the first, its batch's wait, the step's time and
    the batch's samples; the first batch's time and samples; the training thread's CPU in the
    steps; the process tree's CPU and memory (`meter`); the GPU's utilisation (`gpu`)."""

    def __init__(
        self,
        samples_of: Callable[[Any], int],
        *,
        meter: TreeMeter | None = None,
        gpu: bool = True,
        servers: frozenset[int] = frozenset(),
    ) -> None:
        self.samples_of = samples_of
        self.servers = servers  # processes whose CPU the busy cores' reading must add
        self.meter = meter if meter is not None else TreeMeter()
        self.waits: list[float] = []
        self.steps: list[float] = []
        self.samples: list[int] = []
        self.step_cpu_s = 0.0
        # the training thread's CPU getting its batches: from a step's end (the start,
        # `resumed`) to the next arrival; with workers, taking their batches over
        self.fetch_cpu_s = 0.0
        self.first_batch_s: float | None = None
        self.first_samples = 0
        self.epoch_starts: list[int] = []  # each start after the first: its first wait's index
        self._awaiting_first = False
        self.started_at = 0.0  # time.perf_counter() at start()
        self._gpu_wanted = gpu
        self._gpu: GpuUtilization | None = None
        self._cpus = frozenset(os.sched_getaffinity(0))
        self._first: Mark | None = None  # at the start, and at the latest reading of the tree
        self._last: Mark | None = None
        self._back = self._got = self._arrival = self._cpu_at_arrival = self._cpu_from = 0.0
        self._cpu_back = 0.0  # the thread's CPU clock at `_back`
        self._next_read = 0.0
        self._cpu_before = 0.0  # the tree's CPU in the runs before this start (not between)

    @property
    def steps_done(self) -> int:
        return len(self.steps)

    def start(self) -> None:
        """Starts (or starts again: `watch` iterates one loop once per epoch) the meter's and
        the GPU's readings. The steps recorded so far stay, and so does the tree's CPU over
        them, without what it used between the runs (the user's evaluation, say)."""
        if self._gpu_wanted:
            self._gpu = GpuUtilization().__enter__()
        if self._first is not None:  # the tree's CPU of the earlier runs, as their steps stay
            self._cpu_before += self.meter.cpu_s
        self.meter.start()
        now = time.perf_counter()
        self.started_at = self._back = self._arrival = self._next_read = now
        self._cpu_at_arrival = self._cpu_back = time.thread_time()
        self._awaiting_first = True
        self._first = self._last = self._mark_now(self.meter.first)

    def arrived(self, batch: Any) -> float:
        """A batch reached the step now (None: the driver shows the batches with `seen`);
        returns the arrival's time.perf_counter()."""
        now = time.perf_counter()
        self._arrival = now
        self._cpu_at_arrival = self._cpu_from = time.thread_time()
        self.fetch_cpu_s += self._cpu_at_arrival - self._cpu_back
        if self._awaiting_first and self.first_batch_s is not None:
            self.epoch_starts.append(len(self.waits))
        self._awaiting_first = False
        if self.first_batch_s is None:
            self.first_batch_s = now - self._back
            if batch is not None:
                self.seen(batch)
        else:
            self.waits.append(now - self._back)
            self.samples.append(0 if batch is None else self.samples_of(batch))
        if now >= self._next_read:
            self.mark()  # the latest reading (`others_cores`)
            self._next_read = now + READ_PERIOD_S
            self._got = time.perf_counter()  # the reading is no part of the step's time
        else:
            self._got = now
        return now

    def seen(self, batch: Any) -> None:
        """A batch of the step under way: its samples count to the step."""
        if self.samples:
            self.samples[-1] += self.samples_of(batch)
        else:
            self.first_samples += self.samples_of(batch)

    def resumed(self) -> None:
        """The driver's own work after a step ended now: the next wait is timed from here."""
        self._back = time.perf_counter()
        self._cpu_back = time.thread_time()

    def stepping(self) -> None:
        """The step proper starts now: the driver's own work on the batch since its arrival
        stays the loop's, not the step's CPU (its wall time is the step's either way)."""
        self._cpu_from = time.thread_time()

    def stepped(self) -> bool:
        """The step ended; True where it was a step after the first batch (one with a wait)."""
        now = time.perf_counter()
        self._cpu_back = time.thread_time()
        self.step_cpu_s += self._cpu_back - self._cpu_from
        self._back = now
        if len(self.waits) > len(self.steps):
            self.steps.append(now - self._got)
            return True
        return False

    def mark(self, tree: bool = True) -> Mark:
        """The loop at its last arrival, the tree read now where `tree`."""
        if not tree:
            return self._mark_now(None)
        self._last = self._mark_now(self.meter.read())
        return self._last

    def _mark_now(self, tree: TreeSample | None) -> Mark:
        served = sum(cpu_seconds(pid) for pid in self.servers)
        busy = busy_cpu_s(self._cpus) + served
        return Mark(
            self._arrival, self._cpu_at_arrival, self.step_cpu_s, busy, time.perf_counter(), tree,
            served,
        )  # fmt: skip

    def stop(self) -> None:
        if self._gpu is not None:
            self._gpu.__exit__(None, None, None)
        self.mark()

    def others_cores(self) -> float | None:
        """Cores that other work (not this process tree) kept busy from the start to the latest
        reading of the tree, on the cores this process may use: their busy CPU less the
        tree's, over the wall time (both read at once: no reading is taken for it)."""
        first, last = self._first, self._last
        if first is None or last is None or last.tree is None:
            return None
        elapsed = last.read_s - first.read_s
        if elapsed <= 0.5:
            return None
        cpu = last.tree.cpu_since(self.meter.first)
        return max(last.busy_cpu_s - first.busy_cpu_s - cpu, 0.0) / elapsed

    def record(self, label: str, ended: str) -> LoopRun:
        """The loop so far: a batch's wait and the step after it, for every completed step."""
        done = min(len(self.waits), len(self.steps))
        return LoopRun(
            label=label,
            time_to_first_batch_s=self.first_batch_s or 0.0,
            first_batch_samples=self.first_samples,
            wait_s=tuple(self.waits[:done]),
            step_s=tuple(self.steps[:done]),
            samples=tuple(self.samples[:done]),
            ended=ended,
            cpu_s=self._cpu_before + self.meter.cpu_s,
            peak_rss_bytes=self.meter.peak_rss_bytes,
            gpu_utilization=tuple(self._gpu.samples) if self._gpu is not None else (),
            step_cpu_s=self.step_cpu_s,
            fetch_cpu_s=self.fetch_cpu_s,
            epoch_starts=tuple(i for i in self.epoch_starts if i < done),
            others_cores=self.others_cores(),
        )

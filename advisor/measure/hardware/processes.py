"""What a set of processes has used, read at one moment (`TreeSample`: each one's CPU seconds so
far and its resident memory now, from /proc/PID/stat and /proc/PID/statm), and the one sampler
every measuring loop reads its processes with (`TreeMeter`).

The meter reads a process and its descendants (`host.process_tree`, from the tree's own
children files), less the processes it is told to leave out with theirs, synchronously, on the
thread that asks: the instrumented loop (`advisor.measure.loop.instrument`) asks at its start,
at a batch's arrival at most every `READ_PERIOD_S`, at the marks its caller takes and at its
end. So the diagnosing loop, `compare`, `watch` and the trial's sweep count a DataLoader
worker's CPU and memory the same way, from the same readings. No thread: a sampler thread's own
CPU would land in the training thread's and the cores' figures the trial measures, and it reads
between batches, where its cost is the step's (the trial takes it out of the loader's CPU).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from advisor.measure.hardware.host import helper_processes, process_tree, process_usage

READ_PERIOD_S = 0.25  # the loop reads the tree at a batch's arrival at most this often


@dataclass(frozen=True)
class ProcessReading:
    """One process at one reading: user plus system CPU seconds since it started (all its
    threads), and its resident set in bytes (VmRSS; 0 once it has ended)."""

    cpu_s: float
    rss_bytes: int


@dataclass(frozen=True)
class TreeSample:
    """The processes read at one moment, by PID; a process gone when read is absent.

    Immutable: a meter replaces the one it holds, and a reading handed out stays as it was
    (the trial's marks).
    """

    processes: Mapping[int, ProcessReading] = field(default_factory=dict)

    @classmethod
    def read(cls, pids: Iterable[int], root: Path = Path("/")) -> TreeSample:
        readings: dict[int, ProcessReading] = {}
        for pid in pids:
            usage = process_usage(pid, root)
            if usage is not None:
                readings[pid] = ProcessReading(*usage)
        return cls(readings)

    @property
    def total_rss_bytes(self) -> int:
        """The resident sets summed: what the processes held together at this reading (pages
        they share, such as a forked worker's copy-on-write pages, count once per process, as
        the kernel's VmRSS counts them)."""
        return sum(r.rss_bytes for r in self.processes.values())

    def without(self, pid: int) -> TreeSample:
        """These readings less process `pid`'s: a loader's workers, its main process left out."""
        return TreeSample({p: r for p, r in self.processes.items() if p != pid})

    @property
    def largest_rss_bytes(self) -> int:
        """The largest single process's resident set at this reading; 0 with none."""
        return max((r.rss_bytes for r in self.processes.values()), default=0)

    def cpu_since(self, earlier: TreeSample) -> float:
        """CPU seconds these processes used since `earlier`: per process, its CPU now less its
        CPU then, one started since counted from zero. A process that `earlier` saw and this
        reading does not adds nothing (its last work is unknown): chain readings with `then`
        to keep it."""
        before = earlier.processes
        return sum(
            r.cpu_s - (before[pid].cpu_s if pid in before else 0.0)
            for pid, r in self.processes.items()
        )

    def then(self, later: TreeSample) -> TreeSample:
        """`later`, with the processes this reading saw and `later` does not (they ended in
        between) kept at the CPU they were last seen with and no memory: a worker that exits
        inside a window still counts the CPU it used up to one reading before its end. A
        process's CPU never goes back (the larger of the two readings)."""
        merged = {pid: ProcessReading(r.cpu_s, 0) for pid, r in self.processes.items()}
        for pid, r in later.processes.items():
            last = self.processes.get(pid)
            cpu_s = r.cpu_s if last is None else max(r.cpu_s, last.cpu_s)
            merged[pid] = ProcessReading(cpu_s, r.rss_bytes)
        return TreeSample(merged)


class TreeMeter:
    """`meter.start()`, then `meter.read()` at the points a loop chooses: the process `pid`
    (this one by default) and its descendants, their readings chained (`TreeSample.then`: a
    worker that ends between two readings keeps the CPU it was last seen with).

    Left out, with their descendants: `leave_out`, or by default the children that run another
    program when the meter starts (`helper_processes`): a server or a tool the process started,
    such as the demo's SeaweedFS in a notebook's kernel, whose CPU and memory serve the loader
    but are not the loader's. DataLoader workers started before the meter (a persistent
    loader's) are the loader's own, and counted. The trial, which makes its loaders itself,
    leaves out every child that predates them.

    cpu_s: the tree's CPU seconds from the start to the latest reading. peak_rss_bytes: the
    largest total resident set of the tree at one reading; peak_child_rss_bytes: the largest
    single descendant's (a DataLoader worker's) at any reading.
    """

    def __init__(self, pid: int | None = None, leave_out: frozenset[int] | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self._given = leave_out
        self.leave_out = leave_out or frozenset()
        self.peak_rss_bytes = 0
        self.peak_child_rss_bytes = 0
        self.first = self.latest = TreeSample()

    def start(self) -> TreeSample:
        """The first reading; without a `leave_out`, the helpers are those running now (a loop
        started again, `watch`'s next epoch, looks again)."""
        self.leave_out = self._given if self._given is not None else helper_processes(self.pid)
        self.latest = TreeSample()
        self.first = self.read()
        return self.first

    def read(self) -> TreeSample:
        """The tree now, chained onto the readings before it."""
        sample = TreeSample.read(process_tree(self.pid, leave_out=self.leave_out))
        self.latest = self.latest.then(sample)
        self.peak_rss_bytes = max(self.peak_rss_bytes, sample.total_rss_bytes)
        children = sample.without(self.pid).largest_rss_bytes
        self.peak_child_rss_bytes = max(self.peak_child_rss_bytes, children)
        return self.latest

    @property
    def cpu_s(self) -> float:
        """CPU seconds the tree used from the start to the latest reading."""
        return self.latest.cpu_since(self.first)

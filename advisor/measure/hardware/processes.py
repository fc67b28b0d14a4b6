"""What a set of processes has used, read at one moment: each one's CPU seconds so far and its
resident memory now (`host.process_usage`: /proc/PID/stat and /proc/PID/statm).

The one reading both measurements of a loader's processes take their figures from, so that a
DataLoader worker's CPU and memory count the same way in both:

- the trial's sweep (`advisor.measure.trial.sweep`) reads its slice's workers (this process's
  children less those that predate the loader) synchronously, at fixed points of the training
  thread: the workers' CPU is `cpu_since` between the window's opening and the slice's end,
  their memory the largest single worker's resident set (`largest_rss_bytes`) at its readings;
- the loop's `TreeUsage` (`advisor.measure.loop.usage`) reads the whole process tree from a
  sampler thread: the tree's CPU is `cpu_since` over the window, its readings chained (`then`)
  so that a worker that ends inside it keeps its CPU, and its memory the peak of the summed
  resident set (`total_rss_bytes`).

Which processes, and when to read them, stay with each caller: the trial cannot have a thread
of its own (its CPU would land in the training thread's and the cores' figures it measures),
and it must not walk all of /proc on its hot path (`child_pids` reads this process's own task
files, `process_tree` every process's stat).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from advisor.measure.hardware.host import process_usage


@dataclass(frozen=True)
class ProcessReading:
    """One process at one reading: user plus system CPU seconds since it started (all its
    threads), and its resident set in bytes (VmRSS; 0 once it has ended)."""

    cpu_s: float
    rss_bytes: int


@dataclass(frozen=True)
class TreeSample:
    """The processes read at one moment, by PID; a process gone when read is absent.

    Immutable, so a sampler thread can replace the one it holds while another thread reads
    it (`TreeUsage.cpu_s` during a run).
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

"""What a loop costs the machine while it runs: the CPU seconds and the peak resident memory of
this process and every process it started (DataLoader workers included), sampled in a thread.
Each sample is a `TreeSample`, the reading the trial's sweep counts its workers from too."""

from __future__ import annotations

import os
import threading
from types import TracebackType

from advisor.measure.hardware.host import helper_processes, process_tree
from advisor.measure.hardware.processes import TreeSample

SAMPLE_S = 0.05  # how often resident memory and CPU time are read
RESCAN_EVERY = 4  # samples between two walks of /proc for new processes (workers start late)


class TreeUsage:
    """`with TreeUsage() as usage: ...`, then `usage.cpu_s` and `usage.peak_rss_bytes`.

    The tree is `pid` (this process by default) and all its descendants, those that started
    before the window included: a persistent DataLoader's workers, started by an earlier epoch
    or an earlier iteration, are the loader's own. Left out are the children that run another
    program when the window opens (`helper_processes`), with their descendants: a server or a
    tool the process started, such as the demo's SeaweedFS in a notebook's kernel, whose CPU
    and memory serve the loader's requests but are not the loader's. (The trial, which makes
    its loaders itself, leaves out every child that predates them.)

    cpu_s: the tree's CPU seconds over the window (`TreeSample.cpu_since`, as the trial counts
    its workers'). A process that ends inside the window keeps the CPU time it was last seen
    with, so a worker that exits early is still counted (up to one sampling period of its last
    work). peak_rss_bytes: the largest total resident set of the tree at one reading (the sum
    over its processes), where the trial reports the largest single worker's.
    """

    def __init__(self, pid: int | None = None, period_s: float = SAMPLE_S) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.period_s = period_s
        self.peak_rss_bytes = 0
        self._start = self._seen = TreeSample()
        self._helpers: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-usage", daemon=True)

    def __enter__(self) -> TreeUsage:
        self._helpers = helper_processes(self.pid)
        self._start = self._seen = TreeSample.read(self._tree())
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample(self._tree())

    @property
    def cpu_s(self) -> float:
        """CPU seconds the tree used inside the window (processes born inside it from zero)."""
        return self._seen.cpu_since(self._start)

    def _run(self) -> None:
        pids = list(self._seen.processes)
        tick = 0
        while not self._stop.wait(self.period_s):
            if tick % RESCAN_EVERY == 0:
                pids = self._tree()
            tick += 1
            self._sample(pids)

    def _sample(self, pids: list[int]) -> None:
        sample = TreeSample.read(pids)
        self._seen = self._seen.then(sample)
        self.peak_rss_bytes = max(self.peak_rss_bytes, sample.total_rss_bytes)

    def _tree(self) -> list[int]:
        return process_tree(self.pid, leave_out=self._helpers)

"""What a loop costs the machine while it runs: the CPU seconds and the peak resident memory of
this process and every process it started (DataLoader workers included), sampled in a thread."""

from __future__ import annotations

import os
import threading
from types import TracebackType

from advisor.measure.hardware.host import cpu_seconds, process_tree, rss_bytes

SAMPLE_S = 0.05  # how often resident memory and CPU time are read
RESCAN_EVERY = 4  # samples between two walks of /proc for new processes (workers start late)


class TreeUsage:
    """`with TreeUsage() as usage: ...`, then `usage.cpu_s` and `usage.peak_rss_bytes`.

    A process that ends inside the window keeps the CPU time it was last seen with, so a worker
    that exits early is still counted (up to one sampling period of its last work).
    """

    def __init__(self, pid: int | None = None, period_s: float = SAMPLE_S) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.period_s = period_s
        self.peak_rss_bytes = 0
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-usage", daemon=True)

    def __enter__(self) -> TreeUsage:
        self._start = {p: cpu_seconds(p) for p in process_tree(self.pid)}
        self._last = dict(self._start)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample(process_tree(self.pid))

    @property
    def cpu_s(self) -> float:
        """CPU seconds the tree used inside the window (processes born inside it from zero)."""
        return sum(cpu - self._start.get(pid, 0.0) for pid, cpu in self._last.items())

    def _run(self) -> None:
        pids = list(self._last)
        tick = 0
        while not self._stop.wait(self.period_s):
            if tick % RESCAN_EVERY == 0:
                pids = process_tree(self.pid)
            tick += 1
            self._sample(pids)

    def _sample(self, pids: list[int]) -> None:
        total = 0
        for pid in pids:
            cpu = cpu_seconds(pid)
            if cpu > 0:
                self._last[pid] = max(cpu, self._last.get(pid, 0.0))
            total += rss_bytes(pid)
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)

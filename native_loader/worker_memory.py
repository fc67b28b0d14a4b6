"""What can be measured of a DataLoader's workers' memory, cheaply, as they run.

Each worker's peak resident memory as the kernel keeps it (``VmHWM`` in /proc/<pid>/status: a
high-water mark, so a reading every few batches misses only what grew after it), and the OOM
kills the kernel counted in this process's memory cgroup (v2 ``memory.events``, v1
``memory.oom_control``: ``oom_kill``) against the count when the loader started: a kill counted
meanwhile says the OOM killer did it. Linux only; elsewhere the readings are None, and
`native_loader.worker_death` says what it can without them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WorkersMemory", "loop_memory", "memory_limit", "oom_kills", "resident"]

_UNLIMITED = 2**60  # a cgroup v1 limit at least this large is no limit


@dataclass(frozen=True)
class WorkersMemory:
    """What was measured of a loader's workers' memory; None where nothing was.

    peak_bytes: the largest peak resident memory of one worker. dead_bytes: the dead worker's
    own, where it was read. total_bytes: the largest resident memory of `total_of` together
    (shared pages counted in each process). oom_kills: OOM kills the kernel counted in this
    process's memory cgroup while the loader ran. limit_bytes: the memory this process may
    use (its cgroup's limit, else the machine's)."""

    peak_bytes: int | None = None
    dead_bytes: int | None = None
    total_bytes: int | None = None
    total_of: str = "its workers"
    oom_kills: int | None = None
    limit_bytes: int | None = None


def resident(pid: int) -> tuple[int, int] | None:
    """(resident memory now, its peak: VmRSS and VmHWM) of a process in bytes; None when they
    cannot be read (gone, a zombie, not Linux)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except OSError:
        return None
    now = re.search(rb"^VmRSS:\s+(\d+) kB", status, re.M)
    peak = re.search(rb"^VmHWM:\s+(\d+) kB", status, re.M)
    if now is None or peak is None:
        return None
    return int(now.group(1)) * 1024, int(peak.group(1)) * 1024


def _memory_cgroup(root: Path = Path("/")) -> Path | None:
    """The memory cgroup folder of this process (v2 or v1), or None."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    base = root / "sys/fs/cgroup"
    for line in lines:
        number, controllers, path = [*line.split(":", 2), "", ""][:3]
        if number == "0" and not controllers:
            candidates = [base / path.lstrip("/"), base]
        elif "memory" in controllers.split(","):
            candidates = [base / "memory" / path.lstrip("/"), base / "memory"]
        else:
            continue
        for folder in candidates:
            if (folder / "memory.events").is_file() or (folder / "memory.oom_control").is_file():
                return folder
    return None


def oom_kills(root: Path = Path("/")) -> int | None:
    """The OOM kills the kernel has counted in this process's memory cgroup (any OOM killer's,
    system-wide ones included); None where the count cannot be read."""
    folder = _memory_cgroup(root)
    if folder is None:
        return None
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (folder / name).read_text()
        except OSError:
            continue
        match = re.search(r"^oom_kill (\d+)$", text, re.M)
        if match:
            return int(match.group(1))
    return None


def memory_limit(root: Path = Path("/")) -> int | None:
    """Bytes this process may use: its memory cgroup's limit, else the machine's memory."""
    folder = _memory_cgroup(root)
    if folder is not None:
        for name in ("memory.max", "memory.limit_in_bytes"):
            try:
                text = (folder / name).read_text().strip()
            except OSError:
                continue
            if text.isdigit() and int(text) < _UNLIMITED:
                return int(text)
    try:
        meminfo = (root / "proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.M)
    return int(match.group(1)) * 1024 if match else None


def since(start: int | None, now: int | None) -> int | None:
    return None if start is None or now is None else max(now - start, 0)


def loop_memory(
    oom_start: int | None, peak_worker_bytes: int | None, total_bytes: int | None
) -> WorkersMemory:
    """What a loop that measured its process tree (the advisor's diagnose) knows of the workers'
    memory: the largest one worker's peak and the tree's, and the OOM kills since `oom_start`
    (`oom_kills()` when the loop started)."""
    return WorkersMemory(
        peak_bytes=peak_worker_bytes or None,
        total_bytes=total_bytes or None,
        total_of="the loader's processes",
        oom_kills=since(oom_start, oom_kills()),
        limit_bytes=memory_limit(),
    )

"""What else ran on the machine while a timing test ran: said beside the test's failure.

A timing test's bound holds on a machine no other work loads (`make test` runs them alone). When
one fails, the failure alone cannot say whether the code or the machine was slow: this reads
the cores' busy time (`/proc/stat`, the hypervisor's steal apart) and every process's CPU
(`/proc/<pid>/stat`) before and after the test, and names what besides this process tree kept
the cores busy.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Reading:
    wall_s: float
    busy_s: float  # all cores, idle and iowait left out, steal in
    steal_s: float
    processes: dict[int, tuple[str, float]]  # pid: (command, CPU seconds so far)


def read() -> Reading:
    tick = os.sysconf("SC_CLK_TCK")
    busy = steal = 0.0
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        busy = (sum(fields) - fields[3] - fields[4]) / tick
        steal = fields[7] / tick
    except (OSError, ValueError, IndexError):
        pass
    processes: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        rest = text[text.rfind(")") + 2 :].split()
        processes[int(entry)] = (name, (int(rest[11]) + int(rest[12])) / tick)
    return Reading(time.monotonic(), busy, steal, processes)


def said(before: Reading, after: Reading, own: set[int]) -> str:
    """One paragraph: the cores kept busy, the steal, and the busiest processes not in `own`."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    used = {
        pid: (name, cpu - before.processes.get(pid, (name, 0.0))[1])
        for pid, (name, cpu) in after.processes.items()
    }
    others = sorted(
        ((cpu, pid, name) for pid, (name, cpu) in used.items() if pid not in own and cpu > 0),
        reverse=True,
    )
    ours = sum(cpu for pid, (_, cpu) in used.items() if pid in own)
    busiest = ", ".join(f"{name} (pid {pid}) {cpu / wall:.2f}" for cpu, pid, name in others[:5])
    return (
        f"over {wall:.1f} s the cores were busy {(after.busy_s - before.busy_s) / wall:.2f} "
        f"cores (steal {(after.steal_s - before.steal_s) / wall:.2f}); this test's processes "
        f"{ours / wall:.2f}; the busiest others, in cores: {busiest or 'none'}"
    )


def tree(pid: int) -> set[int]:
    """`pid` and every process below it now."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(text[text.rfind(")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, p in parents.items() if p == parent and child not in found]
        found.update(children)
        frontier.extend(children)
    return found

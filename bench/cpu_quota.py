"""A share of this machine for one child process and its children: a cgroup with a CPU quota,
as Kubernetes' `cpu: 1` or `cpu: 500m` gives a container.

cgroup v1 (a `cpu` controller mounted at /sys/fs/cgroup/cpu): `cpu.cfs_quota_us` over
`cpu.cfs_period_us`; cgroup v2 (/sys/fs/cgroup with `cpu` in its `cgroup.controllers`):
`cpu.max`. Either needs the hierarchy writable (root on a host, or a privileged container);
`unavailable()` says why not where it is not. The child joins the cgroup before it runs
anything (a `sh` that writes its own pid to `cgroup.procs`, then execs the command), so every
process it starts is in it too; `remove()` ends what is left in it (processes the child
started) and removes the cgroup.

    with CpuQuota(0.5, "plancheck") as quota:
        subprocess.run(quota.wrap([sys.executable, "-m", "advisor", ...]))
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from types import TracebackType

CGROUP = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # the kernel's default period: a quota of 100,000 us is one core
REMOVE_S = 10.0  # how long `remove` waits for the processes it ended to leave


def _v1_root(base: Path) -> Path | None:
    for name in ("cpu", "cpu,cpuacct"):
        root = base / name
        if (root / "cpu.cfs_quota_us").is_file() and os.access(root, os.W_OK):
            return root
    return None


def _v2_root(base: Path) -> Path | None:
    controllers = base / "cgroup.controllers"
    with contextlib.suppress(OSError):
        if "cpu" in controllers.read_text().split() and os.access(base, os.W_OK):
            return base
    return None


def unavailable(base: Path = CGROUP) -> str | None:
    """Why no CPU quota can be set here; None where one can."""
    if _v1_root(base) is not None or _v2_root(base) is not None:
        return None
    return (
        f"no writable cgroup CPU controller under {base}: neither cgroup v1's cpu controller "
        f"({base}/cpu with cpu.cfs_quota_us) nor cgroup v2's ({base}/cgroup.controllers naming "
        "cpu) can be written by this user; run as root on a host or in a privileged container"
    )


class CpuQuota:
    """A cgroup holding `cores` cores' worth of CPU time (a fraction for part of one)."""

    def __init__(self, cores: float, name: str, base: Path = CGROUP) -> None:
        if cores <= 0:
            raise ValueError(f"{cores=} must be > 0")
        why = unavailable(base)
        if why is not None:
            raise RuntimeError(why)
        self.cores = cores
        quota = round(cores * PERIOD_US)
        v1 = _v1_root(base)
        if v1 is not None:
            self.path = v1 / name
            self.path.mkdir()
            (self.path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (self.path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            self.version = 1
        else:
            with contextlib.suppress(OSError):  # already on where the parent delegates it
                (base / "cgroup.subtree_control").write_text("+cpu\n")
            self.path = base / name
            self.path.mkdir()
            try:
                (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
            except OSError as e:
                self.path.rmdir()
                raise RuntimeError(f"cgroup v2: cannot set cpu.max in {self.path}: {e}") from e
            self.version = 2

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started by a shell that first moves itself into the cgroup."""
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *command]

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(line) for line in (self.path / "cgroup.procs").read_text().split()]
        return []

    def remove(self) -> None:
        """End the processes left in the cgroup (the child's own, by their ids) and remove it,
        waiting REMOVE_S at most for them to leave."""
        deadline = time.monotonic() + REMOVE_S
        while self.path.exists():
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def __enter__(self) -> CpuQuota:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()

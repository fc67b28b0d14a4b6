"""A small /dev/shm, as Docker gives a container by default (64 MB), for one command: a private
mount namespace (``unshare -m``) with a tmpfs of that size on /dev/shm. The mount is private to
that namespace: nothing outside it changes. It needs root (or CAP_SYS_ADMIN); `unavailable`
says why not where it cannot be made.

    done = run_in_small_shm([sys.executable, "script.py"], timeout=60)
    done.stdout, done.stderr, done.left  # what the command wrote, what it left in /dev/shm
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

SHM_MIB = 64  # Docker's default --shm-size
LEFT = "left in /dev/shm:"  # the line the shell prints after the command: what it left there

# "$@" is the command; after it, the shell lists what is left in the tmpfs (one line)
_SCRIPT = (
    'mount -t tmpfs -o size="$SHM" tmpfs /dev/shm || exit 97; "$@"; rc=$?; '
    f'echo "{LEFT} $(ls -A /dev/shm | tr "\\n" " ")" >&2; exit $rc'
)


@dataclass(frozen=True)
class SmallShmRun:
    returncode: int
    stdout: str
    stderr: str  # less the shell's last line: what was left
    left: list[str]  # the names left in /dev/shm after the command ended


@functools.cache
def unavailable() -> str | None:
    """Why a small /dev/shm cannot be made here (None: it can)."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    try:
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -m failed: {exc}"
    if done.returncode != 0:
        return f"no private mount namespace with a tmpfs here: {done.stderr.strip()[:200]}"
    return None


def run_in_small_shm(
    command: Sequence[str], *, timeout: float, mib: int = SHM_MIB, env: dict[str, str] | None = None
) -> SmallShmRun:
    """Run `command` with a /dev/shm of `mib` MiB. Past `timeout`, the command and everything
    it started are killed (a process group of their own) and subprocess.TimeoutExpired raised."""
    environment = {**(env if env is not None else os.environ), "SHM": f"{mib}m"}
    with subprocess.Popen(
        ["unshare", "-m", "sh", "-c", _SCRIPT, "sh", *command], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True,
    ) as process:  # fmt: skip
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    if process.returncode == 97:
        raise RuntimeError(f"could not mount a small /dev/shm: {stderr.strip()}")
    before, found, after = stderr.rpartition(LEFT)  # torch's bus-error line ends in a NUL
    left = after.split() if found else ["?"]
    return SmallShmRun(process.returncode, stdout, before.rstrip("\x00"), left)

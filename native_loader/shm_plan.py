"""/dev/shm: the batches a loader's workers keep in flight, within its free space. Plain
arithmetic, no torch: the advice plans with it (PF-2, SHM-1, the trial's prefetch), and the
run-time checks (`native_loader.shm`) say it in one line."""

from __future__ import annotations

import math
import os

SHM_PATH = "/dev/shm"  # where torch's shared memory lives (shm_open's tmpfs on Linux)
# the share of /dev/shm's free bytes a plan lets the batches in flight take: the rest is for
# the batch the training process holds, other processes and segments rounded up to pages
SHM_SHARE = 0.5


class ShmTooSmallError(RuntimeError):
    """/dev/shm cannot hold the batches a DataLoader's workers keep in flight: one line naming
    its free space, what the batches need and what to change (`shm_advice`)."""


def shm_free_bytes(path: str = SHM_PATH) -> int | None:
    """Bytes free in /dev/shm now (statvfs f_bavail x f_frsize); None where it is absent."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):  # absent, or not a POSIX system
        return None
    return st.f_bavail * st.f_frsize


def prefetch_within_shm(
    prefetch: int, workers: int, batch_bytes: float, room: float, ranks: int = 1
) -> int:
    """The largest prefetch_factor up to `prefetch` whose batches in flight (`ranks` x `workers`
    x prefetch x `batch_bytes`) fit in `room` bytes; 0 where one batch per worker does not."""
    per_batch = max(ranks, 1) * max(workers, 1) * max(batch_bytes, 0.0)
    if per_batch <= 0:
        return prefetch
    return max(min(prefetch, math.floor(room / per_batch)), 0)


def shm_size_gib(need: float, used: float = 0.0) -> int:
    """The `--shm-size` in GiB (Docker's "g") that holds `need` bytes in flight within half of
    it, beside the `used` bytes other processes hold."""
    return max(math.ceil((2 * need + max(used, 0.0)) / 2**30), 1)


def shm_advice(
    free: int,
    workers: int,
    prefetch: int,
    batch_bytes: float,
    *,
    ranks: int = 1,
    used: int = 0,
    cause: str = "",
) -> str:
    """The one line a loader whose batches do not fit in /dev/shm says: its free space, what the
    batches in flight need, and what to change (`cause`, where given, says what happened)."""
    mib = 2**20
    need = max(ranks, 1) * workers * prefetch * batch_bytes
    who = f"{ranks} ranks x " if ranks > 1 else ""
    fits = prefetch_within_shm(prefetch, workers, batch_bytes, free, ranks)
    lower = f" (prefetch_factor={fits} fits)" if 0 < fits < prefetch else ""
    batches = (
        f"{who}{workers} {'worker' if workers == 1 else 'workers'} x {prefetch} "
        f"{'batch' if prefetch == 1 else 'batches'}"
    )
    if batch_bytes > 0:
        batches += f" of {batch_bytes / mib:,.1f} MiB need {need / mib:,.0f} MiB"
    else:  # a batch's bytes not known: ask for twice the size there is
        batches += " need more than that"
        need = free + used
    return (
        f"/dev/shm has {free / mib:,.0f} MiB free{cause}; {batches}: give the container more "
        f"(docker run --shm-size={shm_size_gib(need, used)}g, Kubernetes: an emptyDir with "
        f"medium Memory), or lower prefetch_factor/num_workers/batch_size{lower}"
    )

"""Room on its disk for the local copy (`native_loader.local_copy`): checked before a byte is
fetched, and said plainly when the disk fills anyway (another writer, a file system's overhead).

The error names the folder, the space free on its disk and the space the objects still to copy
need, as an OSError with errno ENOSPC (what it was). Nothing half-copied is kept either way:
each file is written under a temporary name and renamed once whole, and the copy is taken as
complete only at its end.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class CopyLeft:
    """What a sync has still to write: `bytes` in `objects`, of `total` bytes in the copy."""

    bytes: int = 0
    objects: int = 0
    total: int = 0

    def wrote(self, size: int) -> None:
        """One object of `size` bytes was written whole."""
        self.bytes, self.objects = self.bytes - size, self.objects - 1


def check_room(root: str, left: CopyLeft, replaced: int = 0) -> None:
    """Refuse (ENOSPC) a copy whose bytes to write cannot fit the free space in `root`'s file
    system. `replaced`: bytes of the files they replace, freed only as each new one is renamed
    over its old one, so counted as free only beyond the new bytes."""
    if left.bytes - replaced > shutil.disk_usage(root).free:
        raise OSError(errno.ENOSPC, "the objects to copy do not fit")


def disk_full(root: str, left: CopyLeft) -> OSError:
    """The error for a copy that does not fit its disk."""
    return OSError(
        errno.ENOSPC,
        f"no space left for the local copy in {root}: {_bytes(shutil.disk_usage(root).free)} "
        f"free on its disk, {_bytes(left.bytes)} needed for the {left.objects:,} objects still "
        f"to copy ({_bytes(left.total)} in the copy); what was written whole is kept and the "
        "copy is not taken as complete: free space there, or give local_copy_dir a folder on a "
        "larger disk, then prepare again",
    )


@contextlib.contextmanager
def full_disk_said(root: str, left: CopyLeft) -> Iterator[None]:
    """A full disk (ENOSPC, or EDQUOT: a quota) inside is raised as `disk_full`, its original
    kept as `__cause__`."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise disk_full(root, left) from exc


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} B"

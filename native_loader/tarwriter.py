"""Deterministic WebDataset tars: the same samples give the same bytes on any machine.

The writer beside the reader (`native_loader.tar`): `python -m advisor reshard` packs shards
with it, and the advisor's trial packs a sample of them the same way. Each sample's members are
contiguous and sorted by extension; every header has the same fixed mtime, owner and mode, and
names that do not fit ustar (long or non-ASCII) get a pax record, so the bytes depend only on
the names and contents. A file becomes a member named by its key and extension (`split_key`).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable

BLOCK = 512
FIXED_MTIME = 946684800  # 2000-01-01T00:00:00Z: a fixed, plausible date for every member
FIXED_MODE = 0o444


def split_key(relative: str) -> tuple[str, str] | None:
    """WebDataset key and extension (``a/b.c.d`` -> ``a/b``, ``c.d``); None for files that
    cannot be a sample member (no extension, empty stem: hidden files such as ``.DS_Store``)."""
    folder, _, base = relative.rpartition("/")
    stem, dot, ext = base.partition(".")
    if not stem or not dot or not ext:
        return None
    return (f"{folder}/{stem}" if folder else stem), ext


def member_bytes(size: int) -> int:
    """Bytes one member of `size` bytes takes in a tar: a header block and the padded body."""
    return BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK


def tar_size(members_total: int) -> int:
    """Bytes of a tar whose members take `members_total`: two zero blocks end it, and tarfile pads
    the archive to whole 10 KiB records."""
    return -(-(members_total + 2 * BLOCK) // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


class ShardWriter:
    """Builds one shard in memory; `add` members in order, then `finish` for the bytes."""

    def __init__(self) -> None:
        self._buffer = io.BytesIO()
        self._tar = tarfile.open(  # noqa: SIM115 (closed by finish)
            fileobj=self._buffer, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8"
        )

    def add(self, name: str, data: bytes | memoryview) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = FIXED_MTIME
        info.mode = FIXED_MODE
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.type = tarfile.REGTYPE
        self._tar.addfile(info, io.BytesIO(data))

    def finish(self) -> bytes:
        self._tar.close()
        return self._buffer.getvalue()


def build_tar(members: Iterable[tuple[str, bytes | memoryview]]) -> bytes:
    """A tar of (name, bytes) members in the given order."""
    writer = ShardWriter()
    for name, data in members:
        writer.add(name, data)
    return writer.finish()

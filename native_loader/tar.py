"""WebDataset tar shards: members grouped into samples ``{"__key__": ..., "<ext>": bytes}``.

A minimal reader over any buffer (no copy of the shard): ustar/GNU headers, GNU long names and
pax ``path`` records. The key of ``dir/s0001.seg.png`` is ``dir/s0001`` and its extension
``seg.png``; consecutive members with the same key form one sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

BLOCK = 512


class Readable(Protocol):
    """What a streamed archive needs: ``read(n)`` returning at most n bytes (fewer at the end)."""

    def read(self, size: int = -1, /) -> bytes: ...


def _octal(field: bytes) -> int:
    field = field.rstrip(b"\0 ").lstrip(b" ")
    if field and field[0] & 0x80:  # GNU base-256 for large sizes
        value = int.from_bytes(field, "big") & ~(0x80 << (8 * (len(field) - 1)))
        return value
    return int(field or b"0", 8)


def _cstr(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


class _MemberNames:
    """The names of a tar's regular members, header by header: GNU long names (``L``) and pax
    paths (``x``) name the member after them; ustar splits long names into prefix and name."""

    def __init__(self) -> None:
        self.long_name: str | None = None
        self.pax_path: str | None = None

    def regular(self, header: bytes, body: Any) -> str | None:
        """The member's name if it is a regular file, else None (metadata or a directory)."""
        kind = header[156:157]
        if kind == b"L":
            self.long_name = _cstr(bytes(body))
            return None
        if kind == b"x":
            for record in bytes(body).decode("utf-8", "surrogateescape").split("\n"):
                _, _, keyvalue = record.partition(" ")
                if keyvalue.startswith("path="):
                    self.pax_path = keyvalue[5:]
            return None
        if kind == b"g":
            return None
        name = _cstr(header[0:100])
        if header[257:262] == b"ustar" and header[345:346] != b"\0":
            name = _cstr(header[345:500]) + "/" + name
        name = self.pax_path or self.long_name or name
        self.long_name = self.pax_path = None
        return name if kind in (b"0", b"\0", b"7") else None


def iter_members(data: Any) -> Iterator[tuple[str, memoryview]]:
    """(name, bytes view) of each regular file in a tar archive held in a buffer."""
    view = memoryview(data).cast("B")
    offset = 0
    names = _MemberNames()
    while offset + BLOCK <= len(view):
        header = bytes(view[offset : offset + BLOCK])
        if header == b"\0" * BLOCK:
            break
        size = _octal(header[124:136])
        body_start = offset + BLOCK
        body = view[body_start : body_start + size]
        if len(body) < size:
            raise ValueError(f"truncated tar archive: member at offset {offset} is cut short")
        offset = body_start + (size + BLOCK - 1) // BLOCK * BLOCK
        name = names.regular(header, body)
        if name is not None:
            yield name, body


def iter_members_stream(stream: Readable) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular file of a tar archive read from a stream, member by member:
    the first member is ready once its bytes have arrived, not the whole archive."""
    names = _MemberNames()
    while True:
        header = stream.read(BLOCK)
        if len(header) < BLOCK or header == b"\0" * BLOCK:
            return
        size = _octal(header[124:136])
        body = stream.read(size)
        if len(body) < size:
            raise ValueError(f"truncated tar archive: member {_cstr(header[0:100])!r} is cut short")
        padding = (BLOCK - size % BLOCK) % BLOCK
        if padding:
            stream.read(padding)
        name = names.regular(header, body)
        if name is not None:
            yield name, body


def split_name(name: str) -> tuple[str, str]:
    """WebDataset key and extension: ``a/b.c.d`` -> (``a/b``, ``c.d``)."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    key = f"{folder}/{stem}" if folder else stem
    return key, ext if dot else ""


def iter_samples(data: Any) -> Iterator[dict[str, Any]]:
    """Samples of a WebDataset shard held in a buffer, in archive order."""
    return _group((name, bytes(body)) for name, body in iter_members(data))


def iter_samples_stream(stream: Readable) -> Iterator[dict[str, Any]]:
    """Samples of a WebDataset shard read from a stream, each as soon as its members arrived."""
    return _group(iter_members_stream(stream))


def _group(members: Iterator[tuple[str, bytes]]) -> Iterator[dict[str, Any]]:
    sample: dict[str, Any] = {}
    for name, body in members:
        key, ext = split_name(name)
        if key.rpartition("/")[2].startswith("__") and not ext:
            continue
        if sample and sample["__key__"] != key:
            yield sample
            sample = {}
        if not sample:
            sample["__key__"] = key
        sample[ext] = body
    if sample:
        yield sample

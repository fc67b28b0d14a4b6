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


def iter_members(data: Any) -> Iterator[tuple[str, memoryview]]:
    """(name, bytes view) of each regular file in a tar archive held in a buffer."""
    view = memoryview(data).cast("B")
    offset = 0
    long_name: str | None = None
    pax_path: str | None = None
    while offset + BLOCK <= len(view):
        header = bytes(view[offset : offset + BLOCK])
        if header == b"\0" * BLOCK:
            break
        size = _octal(header[124:136])
        kind = header[156:157]
        body_start = offset + BLOCK
        body = view[body_start : body_start + size]
        if len(body) < size:
            raise ValueError(f"truncated tar archive: member at offset {offset} is cut short")
        offset = body_start + (size + BLOCK - 1) // BLOCK * BLOCK
        if kind == b"L":
            long_name = _cstr(bytes(body))
            continue
        if kind == b"x":
            for record in bytes(body).decode("utf-8", "surrogateescape").split("\n"):
                _, _, keyvalue = record.partition(" ")
                if keyvalue.startswith("path="):
                    pax_path = keyvalue[5:]
            continue
        if kind == b"g":
            continue
        name = _cstr(header[0:100])
        if header[257:262] == b"ustar" and header[345:346] != b"\0":
            name = _cstr(header[345:500]) + "/" + name
        name = pax_path or long_name or name
        long_name = pax_path = None
        if kind in (b"0", b"\0", b"7"):
            yield name, body


def iter_members_stream(stream: Readable) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular file of a tar archive read from a stream, member by member:
    the first member is ready once its bytes have arrived, not the whole archive."""

    def exactly(n: int, what: str) -> bytes:
        data = stream.read(n)
        if len(data) < n:
            raise ValueError(f"truncated tar archive: {what} is cut short")
        return data

    long_name: str | None = None
    pax_path: str | None = None
    while True:
        header = stream.read(BLOCK)
        if len(header) < BLOCK or header == b"\0" * BLOCK:
            return
        size = _octal(header[124:136])
        kind = header[156:157]
        body = exactly(size, f"member {_cstr(header[0:100])!r}")
        padding = (BLOCK - size % BLOCK) % BLOCK
        if padding:
            stream.read(padding)
        if kind == b"L":
            long_name = _cstr(body)
            continue
        if kind == b"x":
            for record in body.decode("utf-8", "surrogateescape").split("\n"):
                _, _, keyvalue = record.partition(" ")
                if keyvalue.startswith("path="):
                    pax_path = keyvalue[5:]
            continue
        if kind == b"g":
            continue
        name = _cstr(header[0:100])
        if header[257:262] == b"ustar" and header[345:346] != b"\0":
            name = _cstr(header[345:500]) + "/" + name
        name = pax_path or long_name or name
        long_name = pax_path = None
        if kind in (b"0", b"\0", b"7"):
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

"""WebDataset tar shards: members grouped into samples ``{"__key__": ..., "<ext>": bytes}``.

A minimal reader over any buffer (no copy of the shard) or stream that reads what Python's
`tarfile` reads: ustar and GNU headers (sizes in octal or GNU base-256), GNU long names, and pax
extended (``x``) and global (``g``) headers' ``path`` and ``size``. The key of
``dir/s0001.seg.png`` is ``dir/s0001`` and its extension ``seg.png``; consecutive members with the
same key form one sample.

Where `tarfile` stops quietly (a header cut short or with a bad checksum after the first, an
archive without its two zero end blocks), this reader raises ValueError: a shard cut short must
not read as a shorter shard.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Protocol

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
# Regular files (tarfile's REGULAR_TYPES less GNU sparse, which this reader refuses).
_REGULAR = (b"0", b"\0", b"7")
# Types whose size tarfile does not skip as data; any other type's data blocks are skipped.
_NO_DATA = (b"1", b"2", b"3", b"4", b"5", b"6")
_GNU_TYPES = (b"L", b"K", b"S")  # a ustar prefix is not read for these (as tarfile)
_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")  # "<length> <key>=<value>\n", as tarfile reads it
_HIGH_BYTES = bytes(range(128, 256))


class Readable(Protocol):
    """What a streamed archive needs: ``read(n)`` returning at most n bytes (fewer at the end)."""

    def read(self, size: int = -1, /) -> bytes: ...


def _number(field: bytes, what: str) -> int:
    """A numeric header field as `tarfile.nti` reads it: octal text up to a NUL, or GNU
    base-256 (a first byte of 0x80, or 0xff for a negative number), which holds sizes of 8 GiB
    and more."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[0] == 0xFF else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        raise ValueError(f"invalid tar header: its {what} field {field!r} is no number") from None


def _checksum_ok(header: bytes) -> bool:
    """The header's checksum, as `tarfile` checks it: the sum of its bytes with the checksum
    field read as spaces, as unsigned or (some old tars) as signed bytes."""
    stored = _number(header[148:156], "checksum")
    unsigned = 256 + sum(header[:148]) + sum(header[156:])
    if stored == unsigned:
        return True
    rest = header[:148] + header[156:]
    high = len(rest) - len(rest.translate(None, _HIGH_BYTES))
    return stored == unsigned - 256 * high


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _pax_records(body: bytes) -> dict[str, str]:
    """The ``key=value`` records of a pax header's data; a value may hold newlines (its record
    says its length)."""
    records: dict[str, str] = {}
    position = 0
    while match := _PAX_RECORD.match(body, position):
        length = int(match.group(1))
        if length == 0:
            raise ValueError("invalid pax header: a record of length 0")
        key = match.group(2).decode("utf-8", "surrogateescape")
        value = body[match.end(2) + 1 : match.start(1) + length - 1]
        records[key] = value.decode("utf-8", "surrogateescape")
        position += length
    return records


def _pax_path(records: dict[str, str]) -> str | None:
    path = records.get("path")
    return path.rstrip("/") if path else None


def _pax_size(pax: dict[str, str], global_pax: dict[str, str], name: str, size: int) -> int:
    """The member's size: a pax ``size`` record replaces the header's (which may not hold it)."""
    if "size" in global_pax:  # tarfile would read such data with the header's blocks: refuse
        raise ValueError(f"unsupported tar archive: a global pax header sets the size of {name!r}")
    if "size" not in pax:
        return size
    try:
        return int(pax["size"])
    except ValueError:
        raise ValueError(f"invalid pax header: size={pax['size']!r} for {name!r}") from None


class _Source:
    """Exact reads from a buffer (views, no copy) or a stream, counting the offset."""

    def __init__(self, read: Callable[[int], Any]) -> None:
        self._read = read
        self.offset = 0

    def read(self, size: int) -> Any:
        """`size` bytes, or fewer only at the end of the archive's bytes."""
        data = self._read(size)
        if len(data) < size:  # a stream may hand over less than asked before its end
            pieces = [bytes(data)]
            got = len(data)
            while got < size and (more := self._read(size - got)):
                pieces.append(bytes(more))
                got += len(more)
            data = b"".join(pieces)
        self.offset += len(data)
        return data


def _members(source: _Source) -> Iterator[tuple[str, Any]]:
    """(name, body) of each regular file, in archive order, through the end-of-archive blocks."""
    global_pax: dict[str, str] = {}
    pax: dict[str, str] = {}  # from ``x`` headers, for the next member
    long_name: str | None = None  # from a GNU ``L`` header, for the next member
    while True:
        offset = source.offset
        header = bytes(source.read(BLOCK))
        if len(header) < BLOCK:
            where = "inside a header" if header else "without its two zero end blocks"
            raise ValueError(f"truncated tar archive: it ends at byte {source.offset}, {where}")
        if header == _ZERO_BLOCK:
            second = bytes(source.read(BLOCK))
            if len(second) < BLOCK:
                raise ValueError(
                    f"truncated tar archive: it ends at byte {source.offset}, inside its two "
                    "zero end blocks"
                )
            if second != _ZERO_BLOCK:
                raise ValueError(f"invalid tar archive: a lone zero block at byte {offset}")
            return
        if not _checksum_ok(header):
            raise ValueError(f"invalid tar header at byte {offset}: bad checksum")
        kind = header[156:157]
        name = _text(header[0:100])
        prefix = _text(header[345:500])
        if prefix and kind not in _GNU_TYPES:
            name = f"{prefix}/{name}"
        size = _number(header[124:136], "size")
        meta = kind in (b"x", b"g", b"L", b"K")
        if not meta:
            # as tarfile names it: a pax path, a GNU long name, a global pax path, the header's
            name = _pax_path(pax) or long_name or _pax_path(global_pax) or name
            size = _pax_size(pax, global_pax, name, size)
        if kind == b"S" or any(key.startswith("GNU.sparse.") for key in pax):
            raise ValueError(f"unsupported tar member {name!r}: GNU sparse files are not read")
        if size < 0:
            raise ValueError(f"invalid tar header at byte {offset}: size {size} of {name!r}")
        length = 0 if kind in _NO_DATA else size
        body = source.read(length)
        if len(body) < length:
            raise ValueError(
                f"truncated tar archive: member {name!r} ({length} bytes from byte "
                f"{offset + BLOCK}) is cut short at byte {source.offset}"
            )
        padding = -length % BLOCK
        if padding and len(source.read(padding)) < padding:
            raise ValueError(
                f"truncated tar archive: it ends at byte {source.offset}, in the padding "
                f"after member {name!r}"
            )
        if kind == b"L":
            long_name = _text(bytes(body))
        elif kind == b"x":
            pax.update(_pax_records(bytes(body)))
        elif kind == b"g":
            global_pax.update(_pax_records(bytes(body)))
        elif kind != b"K":
            pax, long_name = {}, None
            directory = kind == b"\0" and name.endswith("/")  # an old-style directory
            if kind in _REGULAR and not directory:
                yield name, body


def iter_members(data: Any) -> Iterator[tuple[str, memoryview]]:
    """(name, bytes view) of each regular file in a tar archive held in a buffer."""
    view = memoryview(data).cast("B")
    position = 0

    def read(size: int) -> memoryview:
        nonlocal position
        piece = view[position : position + size]
        position += len(piece)
        return piece

    return _members(_Source(read))


def iter_members_stream(stream: Readable) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular file of a tar archive read from a stream, member by member:
    the first member is ready once its bytes have arrived, not the whole archive."""
    return ((name, bytes(body)) for name, body in _members(_Source(stream.read)))


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

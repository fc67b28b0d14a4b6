"""`ObjectIndex`: a listed set as a few flat buffers, not a Python object per key.

A million listed `ObjectInfo` cost about 650 B a key in the training process, and every forked
DataLoader worker that touches them writes their reference counts, so the pages that hold them
are copied into each worker (PyTorch issue 13246). Here the names are one UTF-8 buffer with an
array of their ends, the sizes one int64 array, the ETags one buffer with their ends (an MD5
ETag as its 16 bytes): about 75 B a key for keys like ``train/class_0123/img_00012345.jpg``,
in a handful of objects that a worker reads without writing. An `ObjectInfo` is made only for
the object being read.

An index saved to a file (`save`) is read back memory-mapped (`load`): the processes of a node
that load it share one copy of its pages in the page cache.
"""

from __future__ import annotations

import json
import mmap
import os
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, overload

from native_loader.local_copy import write_atomically
from native_loader.results import ObjectInfo

_MAGIC = b"LAINDEX1"  # 8 bytes, then the header's length (8 bytes, little-endian), then it
_SECTIONS = ("names", "name_ends", "sizes", "etags", "etag_ends")
_ALIGN = 8


class ObjectIndex(Sequence["str | ObjectInfo"]):
    """The objects of a listing, in order: ``index[i]`` is an `ObjectInfo` (URI ``head`` plus
    the stored name, key the name, size, ETag) or, for an entry of size -1 (a URI given
    without a listing), the URI as a ``str``. `nbytes`: the buffers' bytes."""

    def __init__(
        self,
        head: str,
        names: Any,
        name_ends: Any,
        sizes: Any,
        etags: Any,
        etag_ends: Any,
        *,
        path: str | None = None,
        header: dict[str, Any] | None = None,
    ) -> None:
        self.head = head
        self._names, self._name_ends, self._sizes = names, name_ends, sizes
        self._etags, self._etag_ends = etags, etag_ends
        self.path = path  # the file it was loaded from (memory-mapped), else None
        self.header = header or {}  # what `save` recorded beside the buffers

    def __len__(self) -> int:
        return len(self._sizes)

    @overload
    def __getitem__(self, position: int) -> str | ObjectInfo: ...

    @overload
    def __getitem__(self, position: slice) -> Sequence[str | ObjectInfo]: ...

    def __getitem__(self, position: int | slice) -> Any:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
            if position < 0:
                raise IndexError("ObjectIndex position out of range")
        size = self._sizes[position]  # IndexError past the end
        name = self.head + _text(self._names, self._name_ends, position)
        if size < 0:
            return name
        return ObjectInfo(name, name[len(self.head) :], size, self._etag(position))

    def _etag(self, position: int) -> str:
        end = self._etag_ends[position]
        start = abs(self._etag_ends[position - 1]) if position else 0
        if end < 0:  # an MD5 ETag, packed: its 16 bytes
            return f'"{bytes(self._etags[start:-end]).hex()}"'
        return str(self._etags[start:end], "utf-8", "surrogateescape")

    @property
    def nbytes(self) -> int:
        return sum(len(memoryview(b).cast("B")) for b in self._buffers())

    def _buffers(self) -> tuple[Any, ...]:
        return (self._names, self._name_ends, self._sizes, self._etags, self._etag_ends)

    def __repr__(self) -> str:
        return f"ObjectIndex({len(self):,} objects under {self.head!r}, {self.nbytes:,} B)"

    def __reduce__(self) -> tuple[Any, ...]:
        # a spawned worker: a saved index maps its file again, one in memory is copied over
        if self.path is not None:
            return (load, (self.path,))
        arrays = tuple(_own(b) for b in self._buffers())
        return (ObjectIndex, (self.head, *arrays), {"header": self.header})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.header = state["header"]
        self.path = None

    def save(self, path: str | os.PathLike[str], **header: Any) -> None:
        """Write the index (and `header`, JSON) to `path` as one file: a temporary in the same
        folder, flushed to disk and renamed, so that a reader finds the old file or the whole
        new one, never a part."""
        path = os.fspath(path)
        sections, offset = {}, 0
        lengths = [len(memoryview(b).cast("B")) for b in self._buffers()]
        head = {**header, "head": self.head, "count": len(self)}
        for name, length in zip(_SECTIONS, lengths, strict=True):
            sections[name] = [offset, length]
            offset += _aligned(length)
        encoded = json.dumps({**head, "sections": sections}).encode()
        start = _aligned(16 + len(encoded))
        chunks: list[Any] = [b"\0" * (start - 16 - len(encoded))]
        for buffer, length in zip(self._buffers(), lengths, strict=True):
            chunks += [memoryview(buffer).cast("B"), b"\0" * (_aligned(length) - length)]
        write_atomically(path, _MAGIC + len(encoded).to_bytes(8, "little") + encoded, *chunks)


def load(path: str | os.PathLike[str]) -> ObjectIndex:
    """The index saved in `path`, its buffers memory-mapped (read-only). ValueError for a file
    that is not a whole index of this format (OSError where it cannot be opened)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mapped)
    try:
        if view[:8] != _MAGIC:
            raise ValueError(f"{path} is not a saved listing index")
        length = int.from_bytes(view[8:16], "little")
        header = json.loads(bytes(view[16 : 16 + length]))
        start = _aligned(16 + length)
        parts = []
        for name in _SECTIONS:
            offset, size = header["sections"][name]
            if start + offset + size > len(view):
                raise ValueError(f"{path} is cut short: its {name} end past the file")
            part = view[start + offset : start + offset + size]
            parts.append(part if name in ("names", "etags") else part.cast("q"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path} is not a whole listing index ({exc})") from exc
    if not len(parts[1]) == len(parts[2]) == len(parts[4]) == header.get("count"):
        raise ValueError(f"{path} is not a whole listing index (its counts differ)")
    return ObjectIndex(header["head"], *parts, path=path, header=header)


class IndexBuilder:
    """Adds listed objects (or URIs) one at a time to growing buffers; `build` the index.
    Every name must start with `head` (``s3://bucket/`` for a bucket's listing, "" for local
    paths and lists of URIs), which is stored once."""

    def __init__(self, head: str = "") -> None:
        self.head = head
        self._names, self._etags = bytearray(), bytearray()
        self._name_ends, self._sizes, self._etag_ends = array("q"), array("q"), array("q")

    def __len__(self) -> int:
        return len(self._sizes)

    def add(self, item: str | ObjectInfo) -> None:
        uri, size, etag = (
            (item.uri, item.size, item.etag) if isinstance(item, ObjectInfo) else (item, -1, "")
        )
        if not uri.startswith(self.head):
            raise ValueError(f"{uri!r} is not under {self.head!r}")
        if isinstance(item, ObjectInfo) and item.key != uri[len(self.head) :]:
            raise ValueError(f"{item!r}: its key is not its URI after {self.head!r}")
        self._names += uri[len(self.head) :].encode("utf-8", "surrogateescape")
        self._name_ends.append(len(self._names))
        self._sizes.append(size)
        packed = _md5(etag)
        if packed is None:
            self._etags += etag.encode("utf-8", "surrogateescape")
            self._etag_ends.append(len(self._etags))
        else:  # an end below 0 marks the 16 bytes of an MD5 ETag (`_etag`)
            self._etags += packed
            self._etag_ends.append(-len(self._etags))

    def extend(self, items: Iterable[str | ObjectInfo]) -> IndexBuilder:
        for item in items:
            self.add(item)
        return self

    def build(self) -> ObjectIndex:
        return ObjectIndex(
            self.head, self._names, self._name_ends, self._sizes, self._etags, self._etag_ends
        )


def _text(buffer: Any, ends: Any, position: int) -> str:
    start = ends[position - 1] if position else 0
    return str(buffer[start : ends[position]], "utf-8", "surrogateescape")


def _md5(etag: str) -> bytes | None:
    """The 16 bytes of an ETag that is a quoted MD5 in lower-case hex (a single-part upload's),
    else None: those are kept as they are."""
    if len(etag) != 34 or etag[0] != '"' or etag[-1] != '"':
        return None
    digits = etag[1:-1]
    if digits != digits.lower():
        return None
    try:
        return bytes.fromhex(digits)
    except ValueError:
        return None


def _aligned(length: int) -> int:
    return -(-length // _ALIGN) * _ALIGN


def _own(buffer: Any) -> Any:
    """A picklable copy of a buffer: bytes for bytes, an int64 array for an int64 one."""
    if isinstance(buffer, (bytes, bytearray)):
        return buffer
    if isinstance(buffer, array):
        return buffer
    view = memoryview(buffer)
    return array("q", view.tolist()) if view.format == "q" else bytes(view)

"""One object of a `PartPipeline` as a file: ``read``, ``readinto``, ``readline``, iteration over
lines, and `chunks` (its bytes as they arrive, no copy). Closing a stream (or leaving the loop
that iterates `iter_streams`) cancels its parts in flight; see `native_loader.stream`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from native_loader.stream import PartPipeline


class ObjectStream(io.RawIOBase):
    """One object read as a stream (a binary, read-only, non-seekable file).

    ``read(n)``, ``readinto(b)``, ``readline()``, ``for line in stream``, `chunks` (its bytes as
    they arrive, no copy). ``size`` is the object's size once known (-1 before). Closing it
    (``with``, ``close()``, or garbage collection) cancels its parts still in flight. A stream
    belongs to one thread at a time; open one per thread to read in parallel.
    """

    def __init__(self, pipeline: PartPipeline, index: int, uri: str, *, owns: bool) -> None:
        super().__init__()
        self.uri = uri
        self._pipeline = pipeline
        self._index = index
        self._owns = owns  # close the pipeline with the stream (a single open())
        self._view = memoryview(b"")
        self._loaded = 0  # bytes of the object handed over by the pipeline so far
        self._pieces = 0
        self._eof = False

    @property
    def size(self) -> int:
        return self._pipeline.size(self._index)

    def readable(self) -> bool:
        return True

    def _advance(self) -> bool:
        """Load the next piece into the view; False at the end of the object."""
        size = self.size
        if self._eof or (self._pieces and size >= 0 and self._loaded >= size):
            self._eof = True
            return False
        got = self._pipeline.next_piece()
        assert got is not None and got[0] == self._index, "the pipeline lost its order"
        self._view = got[2]
        self._loaded += len(self._view)
        self._pieces += 1
        if len(self._view) == 0:
            self._eof = True
            return False
        return True

    def chunks(self) -> Iterator[memoryview]:
        """The rest of the object as views of its bytes as they arrive, in order (no copy)."""
        if len(self._view):
            view, self._view = self._view, memoryview(b"")
            yield view
        while self._advance():
            view, self._view = self._view, memoryview(b"")
            yield view

    def readinto(self, buffer: Any) -> int:
        self._check_open()
        target = memoryview(buffer).cast("B")
        if not len(self._view) and not self._advance():
            return 0
        n = min(len(target), len(self._view))
        target[:n] = self._view[:n]
        self._view = self._view[n:]
        return n

    def read(self, size: int | None = -1) -> bytes:
        self._check_open()
        if size is None or size < 0:
            return b"".join(bytes(v) for v in self.chunks())
        pieces: list[bytes] = []
        while size > 0 and (len(self._view) or self._advance()):
            n = min(size, len(self._view))
            pieces.append(bytes(self._view[:n]))
            self._view = self._view[n:]
            size -= n
        return b"".join(pieces)

    def readall(self) -> bytes:
        return self.read(-1)

    def readline(self, size: int | None = -1) -> bytes:
        self._check_open()
        limit = -1 if size is None else size
        pieces: list[bytes] = []
        while limit != 0 and (len(self._view) or self._advance()):
            view = self._view if limit < 0 else self._view[:limit]
            end = bytes(view).find(b"\n") if len(view) < 65536 else _find_newline(view)
            n = len(view) if end < 0 else end + 1
            pieces.append(bytes(self._view[:n]))
            self._view = self._view[n:]
            if limit > 0:
                limit -= n
            if end >= 0:
                break
        return b"".join(pieces)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed stream")

    def close(self) -> None:
        if not self.closed:
            self._view = memoryview(b"")
            if self._owns:
                self._pipeline.close()
            elif not self._eof:
                self._pipeline.skip(self._index)
        super().close()


def _find_newline(view: memoryview) -> int:
    # Search in slices so that a long part is not copied whole for one short line.
    step = 65536
    for start in range(0, len(view), step):
        found = bytes(view[start : start + step]).find(b"\n")
        if found >= 0:
            return start + found
    return -1


def iter_streams(pipeline: PartPipeline) -> Iterator[ObjectStream]:
    """One stream per source of the pipeline, in order: the next object's parts are fetched
    while the current one is consumed. Use each stream before asking for the next; a stream
    left unfinished is skipped. Leaving the loop cancels everything in flight."""
    try:
        index = 0
        while pipeline.has(index):
            stream = ObjectStream(pipeline, index, pipeline.uri(index), owns=False)
            index += 1
            try:
                yield stream
            finally:
                stream.close()
    finally:
        pipeline.close()

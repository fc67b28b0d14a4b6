"""Objects read as streams: parts fetched by ranged GETs ahead of the consumer, in bounded memory.

`PartPipeline` keeps up to ``window`` parts of a sequence of objects in flight, in (object,
offset) order, and hands their bytes over in that order as they arrive: a part still on the
wire in pieces of `PIECE_BYTES` or more. `native_loader.object_stream.ObjectStream` is the
file-like view of one object of a pipeline. Memory for a pipeline is its window plus the part
being consumed, whatever the objects' sizes: each part is one engine ticket, so it is admitted
under the process's ``max_inflight_requests`` and ``max_inflight_bytes``, and its reservation
is released once the last of it is handed over.

A part the engine could not fetch after its retries raises the reader's usual exception. A part
whose ETag or object size differs from the object's first part (the object was overwritten
while it was streamed, a retry included) raises `S3Error` with code ``ObjectChanged``. Closing
the pipeline cancels its parts in flight.

Local files take the same path: their parts are read with ``pread`` by a small thread pool,
within the same window, so a local copy is read ahead too. A file's size and modification time
stand for its ETag: taken at the start and at the end of every part, they must stay those of
its first part, or `ObjectChanged` is raised as for an object.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from native_loader import _native
from native_loader.config import ReaderConfig
from native_loader.errors import object_changed
from native_loader.local import FileRead, versions
from native_loader.local_pool import submit_local

# Waits are sliced so that Ctrl-C is seen; each request is bounded by the native timeouts.
_WAIT_SLICE_S = 0.2
# A stream starts with this many parts in flight and doubles its window per part handed over
# (see PartPipeline._fill); an object's first part is at most FIRST_PART_BYTES when the consumer
# waits for it (see PartPipeline._part_length).
INITIAL_WINDOW = 2
FIRST_PART_BYTES = 2**20
# A part still arriving is handed over in pieces of at least this many bytes: the consumer works
# on them while the rest arrives, instead of waiting for the whole part (24 MiB for text records,
# a quarter of a second at S3's ~90 MB/s per connection) and then working while nothing does.
PIECE_BYTES = 2**20


def opened_window(delivered: int) -> int:
    """Parts a stream may have in flight after ``delivered`` parts were handed over:
    INITIAL_WINDOW, doubled per part, as TCP's slow start opens per round trip. Parts in flight
    share a link's bandwidth, so a full window at the start would make the first (small) part
    wait for all of them; once it arrived, the window reaches the bandwidth-delay product
    within a few parts instead of one part per part (16 parts of 8 MiB took about 0.4 s at
    20 ms, a third of a 512 MiB read, and one process read 15-35% less than with its window
    full from the start)."""
    return INITIAL_WINDOW << min(delivered, 20)


def stream_budget(config: ReaderConfig) -> int:
    """Bytes (B) one pipeline of streams keeps in flight: ``read_ahead_bytes``, never more than
    ``max_inflight_bytes``."""
    return min(config.read_ahead_bytes, config.max_inflight_bytes)


# Streams read by a parser (text records): parts of this many `part_size`, this many in flight.
PARSED_PART_UNITS = 3
PARSED_PARTS_IN_FLIGHT = 2


def parsed_stream(config: ReaderConfig) -> tuple[int, int]:
    """(part size, read-ahead) in bytes for streams whose consumer parses every byte in Python
    (text records).

    Parts in flight follow the bandwidth-delay product: rate x (first byte + part /
    connection rate) / part. Two parts of 24 MiB at 20 ms and S3's ~90 MB/s per connection
    carry 2 x 25 MB / (0.02 + 0.28 s) = 168 MB/s per stream (one per DataLoader worker): more
    than a worker that does anything per record takes (splitting lines alone runs at about
    500 MB/s; a tokenizer brings it to tens of MB/s). Fewer, larger GETs cost the server less
    (SeaweedFS spends about 20% more CPU on a shard read in 8 MiB parts than in 24 MiB ones),
    and two parts in flight plus the one being read hold 72 MiB, less than a raw stream's
    read-ahead. Parts are `PARSED_PART_UNITS` x ``part_size`` (so they stay on the boundaries
    objects were written in), smaller when the stream budget cannot hold two of them, never
    below ``part_size``.
    """
    unit = config.part_size
    budget = stream_budget(config)
    fits = budget // PARSED_PARTS_IN_FLIGHT // unit * unit
    part = max(unit, min(PARSED_PART_UNITS * unit, fits))
    return part, min(budget, PARSED_PARTS_IN_FLIGHT * part)


@dataclass(frozen=True)
class StreamSource:
    """One object to stream: ``bucket``/``key`` for S3, ``path`` for a local file; ``size`` is
    -1 when unknown (then the first part tells it)."""

    uri: str
    bucket: str = ""
    key: str = ""
    path: str = ""
    size: int = -1


@dataclass
class _Part:
    index: int  # which source
    offset: int
    length: int  # bytes asked for (an object's end may come first)
    ticket: int | None  # S3
    future: Future[FileRead] | None  # local (`_native.read_file`)
    taken: int = 0  # bytes of it handed over so far


RaiseOutcome = Callable[[Any, str], None]


class PartPipeline:
    """Parts of ``sources`` in order, at most ``window`` fetched ahead of the consumer.

    The submission cursor never passes an object whose size is unknown beyond its first part:
    that part's answer gives the size, and only then are the object's later parts (and the next
    objects' parts) queued.
    """

    def __init__(
        self,
        engine: Callable[[], _native.Engine],
        sources: Iterable[StreamSource],
        part_size: int,
        window: int,
        raise_outcome: RaiseOutcome,
    ) -> None:
        self._engine_factory = engine
        self._engine: _native.Engine | None = None
        self._incoming = iter(sources)  # pulled as the submission cursor reaches them
        self._sources: list[StreamSource] = []
        self._part_size = part_size
        self._window = max(1, window)
        self._raise = raise_outcome
        self._sizes: list[int] = []
        self._etags: list[str | None] = []
        self._queue: collections.deque[_Part] = collections.deque()
        self._cursor = (0, 0)  # (source, offset) of the next part to submit
        self._delivered = 0  # parts handed over
        self._closed = False

    # -- submission --------------------------------------------------------------------------

    def _fill(self) -> None:
        window = min(self._window, opened_window(self._delivered))
        while len(self._queue) < window and not self._closed:
            index, offset = self._cursor
            if not self.has(index):
                return
            size = self._sizes[index]
            if size < 0 and offset > 0:
                return  # wait for the first part to tell the size
            if size >= 0 and offset >= size and not (size == 0 and offset == 0):
                self._cursor = (index + 1, 0)
                continue
            length = self._part_length(offset, waited_for=not self._queue)
            if size >= 0:
                length = max(0, min(length, size - offset))
            self._submit(index, offset, length)
            self._cursor = (index + 1, 0) if size == 0 else (index, offset + length)

    def _part_length(self, offset: int, waited_for: bool) -> int:
        """Parts end on multiples of `part_size`: a ranged GET that straddles the boundaries
        the object was written in (multipart parts, a store's chunks) makes the server read
        both sides. An object's first part is small when the consumer waits for it (nothing is
        queued ahead of it), so that its first bytes come quickly; one fetched ahead is a whole
        part, since a request has a cost of its own (a first byte's latency, server work)."""
        if offset == 0 and waited_for:
            return min(self._part_size, FIRST_PART_BYTES)
        return self._part_size - offset % self._part_size

    def _submit(self, index: int, offset: int, length: int) -> None:
        source = self._sources[index]
        size = self._sizes[index]
        if source.path:
            future = submit_local(_native.read_file, source.path, offset, length)
            self._queue.append(_Part(index, offset, length, None, future))
            return
        if self._engine is None:
            self._engine = self._engine_factory()
        ticket = self._engine.submit_get(
            source.bucket, source.key, offset, length, size_hint=size, part_size=self._part_size
        )
        self._queue.append(_Part(index, offset, length, ticket, None))

    # -- delivery ----------------------------------------------------------------------------

    def next_piece(self) -> tuple[int, int, memoryview] | None:
        """(source index, offset, bytes) of the next bytes in order, or None after the last
        ones: the rest of the head part once it has all arrived, or before that the bytes of it
        that have (at least `PIECE_BYTES`, or what is left of it)."""
        if self._closed:
            raise ValueError("I/O operation on a closed stream")
        self._fill()
        while self._queue:
            part = self._queue[0]
            try:
                data, whole = self._arrived(part)
            except BaseException:
                self.close()
                raise
            offset = part.offset + part.taken
            part.taken += len(data)
            if whole:
                self._queue.popleft()
                self._delivered += 1
                self._fill()
            # nothing new at the end of a part handed over in pieces: on to the next part (an
            # empty part, an empty object's, is handed over: it ends its object)
            if len(data) or offset == part.offset:
                return part.index, offset, data
        return None

    def _arrived(self, part: _Part) -> tuple[memoryview, bool]:
        """The bytes of `part` not yet handed over that have arrived, and whether they end it."""
        source = self._sources[part.index]
        if part.future is not None:
            read = part.future.result()
            data, err, file_size = read[0], read[1], read[2]
            if data is None:
                raise OSError(err, os.strerror(err), source.path)
            before, after = versions(read)
            # the file's version (size, mtime) at the start and at the end of the part stands
            # for an object's ETag: a file rewritten or replaced while it is read differs
            self._check(part.index, file_size, before)
            self._check(part.index, file_size, after)
            return memoryview(data).cast("B"), True
        engine = self._engine
        assert engine is not None and part.ticket is not None
        want = part.taken + PIECE_BYTES
        try:
            while True:
                progress = engine.wait_readable(part.ticket, want, _WAIT_SLICE_S)
                if progress.complete:
                    break
                if progress.readable >= part.length:
                    # all its bytes are in: they go with the answer's end, which is near
                    want = part.length + 1
                elif progress.readable >= want and progress.data is not None:
                    # the answer's size and ETag are known before its first byte is written
                    self._check(part.index, progress.object_size, progress.etag)
                    arrived: Any = progress.data  # a native Buffer: the buffer protocol in C
                    return memoryview(arrived).cast("B")[part.taken : progress.readable], False
        except BaseException:
            engine.cancel(part.ticket)
            raise
        outcome = engine.take(part.ticket)
        part.ticket = None
        if outcome.error_kind is not _native.ErrorKind.NONE:
            if outcome.error_kind is _native.ErrorKind.PROTOCOL and outcome.message.startswith(
                "the object changed"
            ):  # the engine's words for a retry that found another object (engine_attempt.cpp)
                raise object_changed(source.uri, outcome.message)
            self._raise(outcome, source.uri)
        self._check(part.index, outcome.object_size, outcome.etag)
        whole: Any = outcome.data  # a native Buffer
        assert whole is not None
        return memoryview(whole).cast("B")[part.taken :], True

    def _check(self, index: int, size: int, etag: str | None) -> None:
        known, uri = self._sizes[index], self._sources[index].uri
        if known >= 0 and size >= 0 and size != known:
            raise object_changed(uri, f"its size is {size} bytes, not the {known} expected")
        if known < 0:
            self._sizes[index] = size
        if etag:
            first = self._etags[index]
            if first is None:
                self._etags[index] = etag
            elif etag != first:
                what = "its version" if self._sources[index].path else "ETag"
                why = f"{what} {etag} differs from {first} of its earlier parts"
                raise object_changed(uri, why)

    def has(self, index: int) -> bool:
        """Whether there is a source `index` (taking sources from the input as needed)."""
        while len(self._sources) <= index:
            source = next(self._incoming, None)
            if source is None:
                return False
            self._sources.append(source)
            self._sizes.append(source.size)
            self._etags.append(None)
        return True

    def uri(self, index: int) -> str:
        return self._sources[index].uri

    def size(self, index: int) -> int:
        """The object's size, -1 while unknown."""
        return self._sizes[index] if self.has(index) else -1

    def skip(self, index: int) -> None:
        """Drop every part of sources up to ``index`` (a stream closed before its end)."""
        while self._queue and self._queue[0].index <= index:
            self._cancel(self._queue.popleft())
        if self._cursor[0] <= index:
            self._cursor = (index + 1, 0)

    def _cancel(self, part: _Part) -> None:
        if part.ticket is not None and self._engine is not None:
            self._engine.cancel(part.ticket)
        if part.future is not None:
            part.future.cancel()

    def close(self) -> None:
        """Cancel every part in flight; idempotent."""
        self._closed = True
        while self._queue:
            self._cancel(self._queue.popleft())

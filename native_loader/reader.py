"""`S3Reader`: list, stat and read S3 objects or local files through the native engine."""

from __future__ import annotations

import collections
import functools
import os
import stat as stat_module
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from native_loader import _native
from native_loader._client import EngineSession, resolve_endpoint, resolve_region
from native_loader.clock import CLOCK_SKEWED, clock_offset_s
from native_loader.config import MIN_PART_SIZE, Credentials, ReaderConfig
from native_loader.errors import error_from_outcome
from native_loader.local import (
    LocalRead,
    file_etag,
    list_local,
    local_read,
    read_local,
    start_local_reads,
)
from native_loader.object_stream import ObjectStream, iter_streams
from native_loader.pages import ListPages, list_pages
from native_loader.results import ObjectInfo, ReadResult
from native_loader.stream import PartPipeline, StreamSource, stream_budget
from native_loader.uri import local_path, parse_uri

# Waits are sliced so that Ctrl-C is seen; each request is bounded by the native timeouts.
_WAIT_SLICE_S = 0.2
# read_many submits up to this many times max_inflight_requests objects ahead of the consumer.
# The engine still runs at most max_inflight_requests requests (and reserves at most
# max_inflight_bytes); the extra tickets keep it busy while finished results wait behind a
# slower one for their turn (in-order delivery), which otherwise idled most of the slots.
READ_AHEAD_FACTOR = 4
_LIST_PAGE = 1000  # keys a listing page asks for (S3's most)
# The engine's counters, as the native EngineStats binds them (read-only properties, in order).
STAT_NAMES = tuple(
    name for name, value in vars(_native.EngineStats).items() if isinstance(value, property)
)


@dataclass
class _Pending:
    uri: str
    ticket: int | None  # None for a local file
    local: LocalRead | None = None


class S3Reader:
    """Reads S3 objects (``s3://bucket/key``) and local files (``file:///p``, ``/p``, ``p``).

    Safe to share between threads; safe across ``fork`` (each process creates its own native
    engine on first use). Use as a context manager or call `close`.
    """

    def __init__(
        self, config: ReaderConfig | None = None, *, credentials: Credentials | None = None
    ) -> None:
        self.config = config if config is not None else ReaderConfig()
        if not isinstance(self.config, ReaderConfig):
            raise TypeError("config must be a native_loader.ReaderConfig")
        if credentials is not None and not isinstance(credentials, Credentials):
            raise TypeError("credentials must be a native_loader.Credentials")
        self._credentials = credentials
        self._session = EngineSession(self.config, credentials)

    def __repr__(self) -> str:
        return f"S3Reader({self.config!r})"

    # Pickling (spawn-started workers): the reader is rebuilt from its config and credentials.
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "credentials": self._credentials}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], credentials=state["credentials"])  # type: ignore[misc]

    # -- listing -----------------------------------------------------------------------------

    def list(
        self, uri: str, *, delimiter: str | None = None, max_keys: int | None = None,
        ahead: bool = False,
    ) -> Iterator[ObjectInfo]:  # fmt: skip
        """Objects under a prefix (``s3://bucket/prefix``), in key order, paginated lazily.

        Local paths are prefixes too (``/data/`` lists inside ``data``, ``/data/tr`` matches
        ``tr*``), walked recursively in name order (one level with ``delimiter="/"``).
        ``max_keys`` caps the total number yielded. With ``ahead``, an S3 listing asks for its
        next page while this one is taken (`native_loader.pages`)."""
        if max_keys is not None and max_keys < 0:
            raise ValueError(f"{max_keys=} must be >= 0")
        if delimiter == "":
            raise ValueError("delimiter must be a non-empty string or None")
        scheme, bucket, key = parse_uri(uri)
        if scheme == "file":
            return list_local(local_path(bucket, key), delimiter, max_keys)
        self._session.engine()  # fail early (closed reader, no credentials)
        pages = ListPages(bucket, key, delimiter or "", max_keys, _LIST_PAGE, ahead)
        return list_pages(self._session.engine(), self._wait, pages)

    def stat(self, uri: str) -> ObjectInfo:
        """Size and ETag of one object (a HEAD request) or file."""
        scheme, bucket, key = parse_uri(uri)
        if scheme == "file":
            path = local_path(bucket, key)
            st = os.stat(path)
            if stat_module.S_ISDIR(st.st_mode):
                raise IsADirectoryError(21, "Is a directory", path)
            return ObjectInfo(uri, path, st.st_size, file_etag(st))
        _require_key(uri, key)
        engine = self._session.engine()
        outcome = self._wait(engine, engine.submit_head(bucket, key), uri)
        return ObjectInfo(uri, key, outcome.object_size, outcome.etag)

    # -- reading -----------------------------------------------------------------------------

    def read(self, uri: str) -> ReadResult:
        """The whole object or file."""
        return self._read(uri, 0, -1)

    def read_range(self, uri: str, offset: int, length: int) -> ReadResult:
        """``length`` bytes from ``offset``; shorter when the object ends first. An offset past
        the end of an S3 object raises S3Error (code InvalidRange)."""
        if offset < 0 or length < 0:
            raise ValueError(f"{offset=} and {length=} must be >= 0")
        return self._read(uri, offset, length)

    def _read(self, uri: str, offset: int, length: int) -> ReadResult:
        scheme, bucket, key = parse_uri(uri)
        if scheme == "file":
            return read_local(uri, local_path(bucket, key), offset, length)
        _require_key(uri, key)
        engine = self._session.engine()
        ticket = engine.submit_get(bucket, key, offset, length)
        return _result(self._wait(engine, ticket, uri), uri)

    def read_many(
        self, uris: Iterable[str | ObjectInfo], *, ordered: bool = True
    ) -> Iterator[ReadResult]:
        """Read many objects with bounded prefetch.

        At most ``max_inflight_requests`` requests run at once, and requests in flight plus
        results not yet consumed reserve at most ``max_inflight_bytes`` (the oldest read
        excepted). Finished results waiting for the consumer do not hold a request slot: up to
        ``READ_AHEAD_FACTOR`` times ``max_inflight_requests`` objects are queued ahead. Results
        come in input order, or as they finish with ``ordered=False``. Closing the iterator (or
        breaking out of the loop) cancels the reads still in flight. The first failure is raised
        and ends the iteration.

        Items may be `ObjectInfo` from `list`: their size lets every part of a large object
        start at once, and an object whose size changed since the listing fails the read.
        """
        return self._read_many(iter(uris), ordered)

    def _read_many(self, uris: Iterator[str | ObjectInfo], ordered: bool) -> Iterator[ReadResult]:
        pending: collections.deque[_Pending] = collections.deque()
        engine: _native.Engine | None = None
        config = self.config
        limit = config.max_inflight_requests * READ_AHEAD_FACTOR
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < limit:
                    source = next(uris, None)
                    if source is None:
                        exhausted = True
                        break
                    if isinstance(source, ObjectInfo):
                        uri, size = source.uri, source.size
                    else:
                        uri, size = source, -1
                    scheme, bucket, key = parse_uri(uri)
                    if scheme == "file":
                        local = local_read(uri, local_path(bucket, key), size)
                        pending.append(_Pending(uri, None, local))
                        continue
                    _require_key(uri, key)
                    engine = self._session.engine()
                    ticket = engine.submit_get(bucket, key, 0, -1, size_hint=size)
                    pending.append(_Pending(uri, ticket))
                if not pending:
                    return
                locals_ = (p.local for p in pending if p.local is not None)
                start_local_reads(locals_, config.max_inflight_requests, config.max_inflight_bytes)
                if ordered or pending[0].ticket is None:
                    yield self._finish(engine, pending.popleft())
                    continue
                first_local = next((p for p in pending if p.ticket is None), None)
                if first_local is not None:
                    pending.remove(first_local)
                    yield self._finish(engine, first_local)
                    continue
                assert engine is not None
                done = set(engine.wait_any([p.ticket for p in pending if p.ticket], _WAIT_SLICE_S))
                for item in [p for p in pending if p.ticket in done]:
                    pending.remove(item)
                    yield self._finish(engine, item)
        finally:
            for item in pending:
                if item.ticket is not None and engine is not None:
                    engine.cancel(item.ticket)
                if item.local is not None:
                    item.local.cancel()

    def open(
        self,
        source: str | ObjectInfo,
        *,
        part_size: int | None = None,
        read_ahead_bytes: int | None = None,
    ) -> ObjectStream:
        """The object (or file) as a stream: a binary file-like object (``read``, ``readinto``,
        ``readline``, iteration over lines, ``chunks()``). Parts of ``part_size`` are fetched
        by ranged GETs up to ``read_ahead_bytes`` ahead of the consumer, so memory does not
        grow with the object's size. Both default to the config's; a part size that is a
        multiple of the config's keeps parts on the same boundaries, and the read-ahead never
        exceeds ``max_inflight_bytes``. Close it (or use ``with``) to cancel what is in flight."""
        sources = [self._stream_source(source)]
        pipeline = self._pipeline(sources, part_size, read_ahead_bytes)
        return ObjectStream(pipeline, 0, sources[0].uri, owns=True)

    def open_many(
        self,
        sources: Iterable[str | ObjectInfo],
        *,
        part_size: int | None = None,
        read_ahead_bytes: int | None = None,
    ) -> Iterator[ObjectStream]:
        """One stream per object, in order; the next object's first parts are fetched while
        the current one is read (within the same read-ahead). Read each stream before taking
        the next: one left unfinished is skipped. Leaving the loop cancels the rest.
        ``part_size`` and ``read_ahead_bytes`` as for `open`."""
        streamed = (self._stream_source(s) for s in sources)
        return iter_streams(self._pipeline(streamed, part_size, read_ahead_bytes))

    def _stream_source(self, source: str | ObjectInfo) -> StreamSource:
        uri, size = (source.uri, source.size) if isinstance(source, ObjectInfo) else (source, -1)
        scheme, bucket, key = parse_uri(uri)
        if scheme == "file":
            return StreamSource(uri, path=local_path(bucket, key), size=size)
        _require_key(uri, key)
        return StreamSource(uri, bucket=bucket, key=key, size=size)

    def _pipeline(
        self, sources: Iterable[StreamSource], part_size: int | None, read_ahead: int | None
    ) -> PartPipeline:
        config = self.config
        part = config.part_size if part_size is None else part_size
        if isinstance(part, bool) or not isinstance(part, int) or part < MIN_PART_SIZE:
            raise ValueError(f"{part_size=} must be an int >= {MIN_PART_SIZE} (64 KiB) or None")
        budget = stream_budget(config)
        if read_ahead is not None:
            if isinstance(read_ahead, bool) or not isinstance(read_ahead, int) or read_ahead < 0:
                raise ValueError(f"read_ahead_bytes={read_ahead!r} must be an int >= 0 or None")
            budget = min(budget, read_ahead)
        raise_outcome = functools.partial(_raise, config=self.config)
        return PartPipeline(self._session.engine, sources, part, budget // part, raise_outcome)

    def _finish(self, engine: _native.Engine | None, item: _Pending) -> ReadResult:
        if item.local is not None:
            return item.local.result()
        assert engine is not None and item.ticket is not None
        return _result(self._wait(engine, item.ticket, item.uri), item.uri)

    def _wait(
        self, engine: _native.Engine, ticket: int, uri: str, what: str = ""
    ) -> _native.Outcome:
        """The ticket's outcome, or its error raised; `what` (``"listing page 2"``) says which
        request of `uri` failed, where it was one of many."""
        try:
            while not engine.wait(ticket, _WAIT_SLICE_S):
                pass
        except BaseException:
            engine.cancel(ticket)
            raise
        outcome = engine.take(ticket)
        if outcome.error_kind is not _native.ErrorKind.NONE:
            _raise(outcome, uri, config=self.config, what=what)
        return outcome

    # -- lifecycle ---------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters of this process's engine: ``active_requests``, ``peak_active_requests``,
        ``inflight_bytes``, ``peak_inflight_bytes``, ``requests``, ``connections`` (new ones
        opened; the other requests reused kept-alive connections), ``retries``,
        ``bytes_received``, ``open_tickets``; throttling: ``throttled`` (answers asking to slow
        down: 503 SlowDown, 429, Throttling), ``rate_cuts`` (times the adaptive limiter cut the
        send rate), ``send_rate_limit`` (requests/s it allows now, 0 = not limiting) and
        ``rate_limited_ms`` (time requests waited for it). All zero before the first request."""
        engine = self._session.current()
        stats = engine.stats() if engine is not None else _native.EngineStats()
        return {name: getattr(stats, name) for name in STAT_NAMES}

    def close(self) -> None:
        """Cancel everything in flight and stop the engine. Idempotent."""
        self._session.close()

    @property
    def closed(self) -> bool:
        return self._session.closed

    def __enter__(self) -> S3Reader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _raise(outcome: _native.Outcome, uri: str, *, config: ReaderConfig, what: str = "") -> None:
    message, attempts = outcome.message, outcome.attempts
    if what and outcome.error_kind is not _native.ErrorKind.HTTP:
        # "listing page 2 (asked 4 times) was cut short (...): ...; check ..., then list again"
        what += f" (asked {attempts} times)" if attempts > 1 else ""
        page = "the page"  # how the engine's own words about a page start
        start = message[len(page) :] if message.startswith(page) else f": {message}"
        message, attempts = what + start, 1
    elif uri.endswith("/") and outcome.status == 404:
        message += (
            f"{'; ' if message else ''}a URI ending in '/' is read as the object of that key: "
            "to read the objects under a prefix, list it (S3Reader.list) or give it to a dataset"
        )
    offset = None
    if outcome.code == CLOCK_SKEWED:  # how far off: the storage's time, asked once now
        endpoint = resolve_endpoint(config, resolve_region(config, None))[0]
        offset = clock_offset_s(endpoint, min(config.connect_timeout_s, 5.0))
    raise error_from_outcome(
        outcome.error_kind, outcome.status, outcome.code, message, outcome.request_id, attempts,
        uri, unsigned=config.unsigned, clock_offset_s=offset,
    )  # fmt: skip


def _require_key(uri: str, key: str) -> None:
    # A key ending in "/" is an object like any other when it has bytes (S3 holds such keys; a
    # listing gives them): it is read, and a prefix given by mistake answers 404, which says so.
    if not key:
        raise ValueError(f"{uri!r} names a bucket, not an object (expected s3://bucket/key)")


def _result(outcome: _native.Outcome, uri: str) -> ReadResult:
    data = outcome.data
    assert data is not None
    return ReadResult(data, uri, outcome.first_byte_s, outcome.elapsed_s, outcome.attempts)

"""A local, size-capped cache of object bytes, so that epochs after the first read from disk.

Files are keyed by a hash of the endpoint, the URI and the ETag (when the listing gave one), so
a changed object, or the same bucket on another endpoint, is never served stale. Writes go to a
temporary name, are flushed to disk (fsync) and renamed into place, so a crash leaves the old file
or a whole new one and DataLoader workers of the same job can share one cache directory; a file
whose size is not the listed size (a crash before the data reached the disk) is a miss, read again.
When the cache grows past `max_bytes`, the least recently used files are removed (a hit refreshes a
file's access time, never its modification time: that stands for its version while a process
streams it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from native_loader import _native
from native_loader.object_stream import ObjectStream
from native_loader.reader import ObjectInfo, ReadResult, S3Reader

_SUFFIX = ".obj"
DEFAULT_CACHE_BYTES = 100 * 2**30


def touch(path: str | os.PathLike[str]) -> None:
    """Mark a cached file most recently used: its access time, never its modification time. A
    file's size and mtime stand for its version while it is streamed (`native_loader.stream`):
    a hit in one process must not read as a rewrite to another process streaming the file."""
    mtime = os.stat(path).st_mtime_ns
    os.utime(path, ns=(time.time_ns(), mtime))


class LocalCache:
    """Object bytes under `directory`, at most about `max_bytes` of them (LRU eviction).
    `source`: where the URIs are (the endpoint URL), part of every key, so that one bucket name
    on two endpoints is two sets of files."""

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int, source: str = "") -> None:
        if max_bytes <= 0:
            raise ValueError(f"cache {max_bytes=} must be > 0")
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.source = source
        self._added_since_scan = 0
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"LocalCache({str(self.directory)!r}, max_bytes={self.max_bytes})"

    def path(self, uri: str, etag: str = "") -> Path:
        key = f"{self.source}\0{uri}\0{etag}" if self.source else f"{uri}\0{etag}"
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self.directory / f"{digest}{_SUFFIX}"

    def has(self, uri: str, etag: str = "", size: int = -1) -> bool:
        """True when `uri` is cached whole: its file is there and, where the listing gave a
        `size` (>= 0), of that size. A file of another size (left short by a crash) is removed."""
        path = self.path(uri, etag)
        try:
            held = path.stat().st_size
        except OSError:
            return False
        if size < 0 or held == size:
            return True
        with contextlib.suppress(OSError):
            path.unlink()
        return False

    def get(self, uri: str, etag: str = "", size: int = -1) -> ReadResult | None:
        """The cached bytes of `uri` as a ReadResult, or None (also when they are not the
        listed `size`, where one is given)."""
        path = self.path(uri, etag)
        started = time.monotonic()
        try:
            with open(path, "rb") as f:
                data = f.read()
            touch(path)
        except OSError:
            self.misses += 1
            return None
        if size >= 0 and len(data) != size:
            with contextlib.suppress(OSError):
                path.unlink()
            self.misses += 1
            return None
        self.hits += 1
        elapsed = time.monotonic() - started
        return ReadResult(_native.buffer_from(data), uri, 0.0, elapsed, 0)

    def put(self, uri: str, data: Any, etag: str = "") -> None:
        """Store the bytes of `uri` (anything with the buffer protocol); evict if over the cap."""
        view = memoryview(data).cast("B")
        if len(view) > self.max_bytes:
            return  # larger than the whole cache: not worth evicting everything for it
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(view)
                f.flush()
                os.fsync(f.fileno())  # on disk before the rename: never a short file after a crash
            os.replace(tmp, self.path(uri, etag))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return  # a full disk makes the cache useless, not the training
        self.note_added(len(view))

    def note_added(self, nbytes: int) -> None:
        """Count bytes just stored; evict when an eighth of the cap was added since a scan."""
        self._added_since_scan += nbytes
        if self._added_since_scan >= self.max_bytes // 8:
            self.evict()

    def evict(self) -> int:
        """Remove least recently used files (`touch`) until the cache fits; returns the bytes it
        holds."""
        self._added_since_scan = 0
        entries = []
        for entry in os.scandir(self.directory):
            if not entry.name.endswith(_SUFFIX):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat()
                entries.append((st.st_atime, st.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)  # another worker may have removed it already
            total -= size
        return total


def read_through(
    reader: S3Reader, objects: Sequence[str | ObjectInfo], cache: LocalCache
) -> Iterator[ReadResult]:
    """Results in the order of `objects`: cached ones from disk, the rest through one
    `read_many` stream (so misses keep their prefetch), stored in the cache as they arrive."""
    cached = [cache.has(*_key(item)) for item in objects]
    stream = reader.read_many([item for item, hit in zip(objects, cached, strict=True) if not hit])
    try:
        for item, hit in zip(objects, cached, strict=True):
            uri, etag, size = _key(item)
            result = cache.get(uri, etag, size) if hit else None
            if result is None and hit:
                result = reader.read(uri)  # evicted since we looked: read it directly
            if result is None:
                result = next(stream)
                cache.put(uri, result, etag)
            yield result
    finally:
        stream.close()  # type: ignore[attr-defined]


def stream_through(
    reader: S3Reader,
    objects: Sequence[str | ObjectInfo],
    cache: LocalCache,
    **stream: int,
) -> Iterator[ObjectStream | _TeeStream]:
    """Streams in the order of `objects`: cached ones from their local copy, the rest through
    one `open_many` (so misses keep their read-ahead), each copied into the cache as its parts
    arrive and kept once it was read to the end. Use each stream before taking the next.
    ``stream``: `S3Reader.open`'s ``part_size`` and ``read_ahead_bytes``."""
    cached = [cache.has(*_key(item)) for item in objects]
    misses = reader.open_many(
        [o for o, hit in zip(objects, cached, strict=True) if not hit], **stream
    )
    try:
        for item, hit in zip(objects, cached, strict=True):
            uri, etag, _ = _key(item)
            if hit:
                try:
                    touch(cache.path(uri, etag))  # fails if evicted
                    cache.hits += 1
                    with reader.open(str(cache.path(uri, etag)), **stream) as local:
                        yield local
                    continue
                except FileNotFoundError:
                    pass  # evicted since we looked: read it from its source
                with reader.open(item, **stream) as direct:
                    yield direct
                continue
            cache.misses += 1
            tee = _TeeStream(next(misses), cache, uri, etag)
            try:
                yield tee
            finally:
                tee.close()
    finally:
        misses.close()  # type: ignore[attr-defined]


class _TeeStream:
    """An `ObjectStream` whose bytes are also written to a temporary file, renamed into the
    cache when the stream was read to its end (and dropped otherwise)."""

    def __init__(self, stream: ObjectStream, cache: LocalCache, uri: str, etag: str) -> None:
        self.uri = uri
        self._stream, self._cache, self._etag = stream, cache, etag
        self._written = 0
        fd, self._tmp = tempfile.mkstemp(dir=cache.directory, suffix=".tmp")
        self._file: Any = os.fdopen(fd, "wb")

    def _copy(self, data: Any) -> None:
        if self._file is not None:
            try:
                self._file.write(data)
                self._written += len(data)
            except OSError:  # a full disk makes the cache useless, not the training
                self._discard()

    def read(self, size: int = -1, /) -> bytes:
        data = self._stream.read(size)
        self._copy(data)
        return data

    def chunks(self) -> Iterator[memoryview]:
        for chunk in self._stream.chunks():
            self._copy(chunk)
            yield chunk

    def _discard(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._file = None

    def close(self) -> None:
        complete = self._stream.size >= 0 and self._written == self._stream.size
        if self._file is not None and complete and self._written <= self._cache.max_bytes:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())  # on disk before the rename, as in `put`
                self._file.close()
                self._file = None
                os.replace(self._tmp, self._cache.path(self.uri, self._etag))
                self._cache.note_added(self._written)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(self._tmp)
        self._discard()
        self._stream.close()


def _key(item: str | ObjectInfo) -> tuple[str, str, int]:
    """(uri, etag, listed size); a bare URI has neither ETag nor size (-1)."""
    return (item.uri, item.etag, item.size) if isinstance(item, ObjectInfo) else (item, "", -1)


class CacheSpec:
    """Where a dataset caches; the `LocalCache` itself is made per process on first use.
    `source`: the endpoint the dataset reads (see `LocalCache`)."""

    def __init__(
        self, directory: str | os.PathLike[str] | None, max_bytes: int, source: str = ""
    ) -> None:
        if directory is not None and max_bytes <= 0:
            raise ValueError(f"cache_max_bytes={max_bytes} must be > 0")
        self.directory = directory
        self.max_bytes = max_bytes
        self.source = source
        self._cache: LocalCache | None = None
        self._pid = 0

    def get(self) -> LocalCache | None:
        if self.directory is None:
            return None
        if self._cache is None or self._pid != os.getpid():
            self._cache = LocalCache(self.directory, self.max_bytes, self.source)
            self._pid = os.getpid()
        return self._cache

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": None}

"""Local files for `S3Reader`: listing with S3 prefix semantics, reads, and read-ahead.

`LocalReadAhead` gives local files what the engine gives S3 objects in `read_many`: reads
started ahead of the consumer (``pread`` on the threads of `local_pool`, the GIL released)
within the reader's ``max_inflight_requests`` and ``max_inflight_bytes`` (the oldest read
excepted), so a process reading a local copy is not left without prefetch.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from native_loader import _native
from native_loader.errors import object_changed
from native_loader.local_pool import submit_local
from native_loader.results import ObjectInfo, ReadResult


@dataclass
class LocalRead:
    """One local file queued in `read_many`: started when the budget allows."""

    uri: str
    path: str
    size: int  # bytes reserved (the listing's size, else the file's size now)
    future: Future[tuple[Any, int, int, str, str]] | None = None
    started: float = field(default=0.0)

    def start(self) -> None:
        self.started = time.perf_counter()
        self.future = submit_local(read_part, self.path, 0, -1)

    def result(self) -> ReadResult:
        if self.future is None:
            self.start()
        assert self.future is not None
        data, err, _, before, after = self.future.result()
        if data is None:
            raise OSError(err, os.strerror(err), self.path)
        unchanged(self.uri, before, after)
        elapsed = time.perf_counter() - self.started
        return ReadResult(data, self.uri, elapsed, elapsed, 1)

    def cancel(self) -> None:
        if self.future is not None:
            self.future.cancel()


def local_read(uri: str, path: str, size: int) -> LocalRead:
    if size < 0:
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0  # the read itself raises what is wrong
    return LocalRead(uri, path, size)


def start_local_reads(queued: Iterator[LocalRead], max_reads: int, max_bytes: int) -> None:
    """Start queued local reads, in order, while at most `max_reads` run and their bytes stay
    within `max_bytes`; the oldest read always starts."""
    running = reserved = 0
    for read in queued:
        if read.future is not None:
            running += 1
            reserved += read.size
            continue
        if running and (running >= max_reads or reserved + read.size > max_bytes):
            return
        read.start()
        running += 1
        reserved += read.size


def file_etag(st: os.stat_result) -> str:
    return f'"{st.st_mtime_ns:x}-{st.st_size:x}"'


def file_version(st: os.stat_result) -> str:
    """What stands for a local file's ETag while it is read: a file rewritten or replaced
    changes its size or its modification time (ns)."""
    return f"(size {st.st_size}, st_mtime_ns {st.st_mtime_ns})"


def read_part(path: str, offset: int, length: int) -> tuple[Any, int, int, str, str]:
    """`_native.read_file`'s (bytes or None, errno, file size) for a byte range of a local
    file, and the file's version (`file_version`) before and after the read: the bytes are of
    one version only if both are that version. A file that went away raises OSError."""
    before = file_version(os.stat(path))
    data, err, size = _native.read_file(path, offset, length)
    after = file_version(os.stat(path)) if data is not None else before
    return data, err, size, before, after


def unchanged(uri: str, before: str, after: str) -> None:
    """Raise `ObjectChanged` (`object_changed`) where a read's file changed while it was read."""
    if after != before:
        raise object_changed(uri, f"its version went from {before} to {after} during a read")


def read_local(uri: str, path: str, offset: int, length: int) -> ReadResult:
    """A byte range of a local file (length < 0: to the end), read in this thread."""
    start = time.perf_counter()
    data, err, _, before, after = read_part(path, offset, length)
    if data is None:
        raise OSError(err, os.strerror(err), path)
    unchanged(uri, before, after)
    elapsed = time.perf_counter() - start
    return ReadResult(data, uri, elapsed, elapsed, 1)


def list_local(path: str, delimiter: str | None, max_keys: int | None) -> Iterator[ObjectInfo]:
    # Prefix semantics, as on S3: "/d/" lists inside d, "/d/tr" lists d/tr* (files and folders).
    directory, name_prefix = os.path.split(path)

    def walk(folder: str) -> Iterator[ObjectInfo]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for entry in entries:
            full = entry.path
            if folder == directory and not entry.name.startswith(name_prefix):
                continue
            if entry.is_dir(follow_symlinks=True):
                if delimiter == "/":
                    yield ObjectInfo(full + "/", full + "/", 0, "")
                else:
                    yield from walk(full)
            elif entry.is_file(follow_symlinks=True):
                st = entry.stat()
                yield ObjectInfo(full, full, st.st_size, file_etag(st))

    yield from itertools.islice(walk(directory or "."), max_keys)

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

# `_native.read_file`'s answer: (bytes or None, errno, file size, mtime ns, size and mtime ns
# once read). The local pool runs the native call as it is: Python code around it there would
# take the GIL from the training thread on every read.
FileRead = tuple[Any, int, int, int, int, int]


@dataclass
class LocalRead:
    """One local file queued in `read_many`: started when the budget allows."""

    uri: str
    path: str
    size: int  # bytes reserved (the listing's size, else the file's size now)
    future: Future[FileRead] | None = None
    started: float = field(default=0.0)

    def start(self) -> None:
        self.started = time.perf_counter()
        self.future = submit_local(_native.read_file, self.path, 0, -1)

    def result(self) -> ReadResult:
        if self.future is None:
            self.start()
        assert self.future is not None
        read = self.future.result()
        data, err = read[0], read[1]
        if data is None:
            raise OSError(err, os.strerror(err), self.path)
        unchanged(self.uri, read)
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


def versions(read: FileRead) -> tuple[str, str]:
    """A local file's version as it was opened and once the range was read (`_native.
    read_file` takes both with fstat on its descriptor, without the GIL): its size and
    modification time (ns), which stand for an object's ETag. A file rewritten while it is read
    differs; one replaced (renamed over) is seen by the next open, the next part's."""
    _, _, size, mtime, size_after, mtime_after = read
    return f"(size {size}, st_mtime_ns {mtime})", f"(size {size_after}, st_mtime_ns {mtime_after})"


def unchanged(uri: str, read: FileRead) -> None:
    """Raise `ObjectChanged` (`object_changed`) where a read's file changed while it was read."""
    if read[2:4] != read[4:6]:  # (size, mtime) as opened and once read
        before, after = versions(read)
        raise object_changed(uri, f"its version went from {before} to {after} during a read")


def read_local(uri: str, path: str, offset: int, length: int) -> ReadResult:
    """A byte range of a local file (length < 0: to the end), read in this thread."""
    start = time.perf_counter()
    read: FileRead = _native.read_file(path, offset, length)
    data, err = read[0], read[1]
    if data is None:
        raise OSError(err, os.strerror(err), path)
    unchanged(uri, read)
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

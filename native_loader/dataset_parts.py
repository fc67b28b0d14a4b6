"""What the datasets share (`native_loader.datasets`, `native_loader.map_dataset`): each
process's reader and counts (`OwnReader`), a source's objects, a reader's share of a shuffled
epoch as positions, and the objects handed to a reader until they are read."""

from __future__ import annotations

import collections
import hashlib
import os
import random
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch.utils.data

from native_loader.config import Credentials, ReaderConfig
from native_loader.listing import IndexSpec, given, list_index
from native_loader.reader import ObjectInfo, S3Reader
from native_loader.sample_errors import SampleCounts

Transform = Callable[[Any], Any]
Source = str | Iterable[str] | Iterable[ObjectInfo]


def resolve_source(
    source: Source, reader: S3Reader, tar_only: bool = False
) -> Sequence[str | ObjectInfo]:
    """The objects of a source: a listed prefix as a compact `ObjectIndex` (listed objects keep
    their size and ETag: it lets large reads start at once), a list of URIs as given."""
    if isinstance(source, str):
        return list_index(source, reader, tar_only)[0]
    return given(source)


def object_uri(item: str | ObjectInfo) -> str:
    return item.uri if isinstance(item, ObjectInfo) else item


def shuffled_share(count: int, seed: str, index: int, readers: int) -> array[int]:
    """Positions `index`, `index + readers`, ... of a permutation of ``range(count)`` seeded by
    `seed`: one reader's share of a shuffled epoch, as int64 (no Python object per position)."""
    digest = hashlib.sha256(seed.encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)
    order = torch.randperm(count, generator=generator)
    return array("q", order[index::readers].tolist())


def distributed() -> tuple[int, int]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class OwnReader:
    """What both datasets share: each process's reader, made on first use from the settings
    and credentials, and the counts its DataLoader workers report."""

    _config: ReaderConfig
    _credentials: Credentials | None
    _reader: S3Reader | None
    counts: SampleCounts

    def sample_stats(self) -> dict[str, int]:
        """Samples seen and skipped so far, by every DataLoader worker of this dataset."""
        return self.counts.totals()

    def reader_stats(self) -> dict[str, int]:
        """Throttling and retries met so far by the readers of every DataLoader worker of this
        dataset: ``throttled`` answers, ``rate_cuts``, ``rate_limited_ms`` and ``retries``
        (requests sent again: throttled, failed with a 5xx, reset or cut short; see
        `S3Reader.stats`), as of each worker's last count of its samples."""
        return self.counts.reader_totals()

    def _own_reader_stats(self) -> dict[str, int]:
        return self._reader.stats() if self._reader is not None else {}

    @property
    def config(self) -> ReaderConfig:
        """The reader settings (requests in flight, part size, timeouts) of each process."""
        return self._config

    @property
    def reader(self) -> S3Reader:
        if self._reader is None:
            self._reader = S3Reader(self._config, credentials=self._credentials)
        return self._reader


class HandedObjects:
    """Objects handed to a reader and not yet read, kept so that the reads can go on after a
    failed one: the oldest is the one whose read failed (results come in order). `failure`:
    what the objects' own source raised (a listing page that failed), never a read's."""

    def __init__(self, objects: Iterable[str | ObjectInfo]) -> None:
        self._rest = iter(objects)
        self.taken: collections.deque[str | ObjectInfo] = collections.deque()
        self.failure: BaseException | None = None

    def hand(self) -> Iterator[str | ObjectInfo]:
        """The objects to read: those handed before and not read, then the rest."""
        again, self.taken = self.taken, collections.deque()
        for item in again:
            self.taken.append(item)
            yield item
        while True:
            try:
                item = next(self._rest)
            except StopIteration:
                return
            except BaseException as exc:
                self.failure = exc
                raise
            self.taken.append(item)
            yield item

    def done(self) -> str | ObjectInfo:
        return self.taken.popleft()


def index_spec(
    index_dir: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
    max_age_s: float,
    refresh: bool,
    save: bool = True,
) -> IndexSpec:
    """Where a dataset saves its listing: `index_dir`, else `cache_dir`; nowhere unless `save`."""
    folder = index_dir if index_dir is not None else cache_dir
    return IndexSpec(None if folder is None or not save else os.fspath(folder), max_age_s, refresh)


def buffered_shuffle(items: Iterator[Any], size: int, rng: random.Random) -> Iterator[Any]:
    buffer: list[Any] = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        slot = rng.randrange(size)
        yield buffer[slot]
        buffer[slot] = item
    rng.shuffle(buffer)
    yield from buffer

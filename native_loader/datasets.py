"""PyTorch datasets over S3 (or local) objects, read with the native reader.

`S3IterableDataset` streams objects (or WebDataset samples of tar shards), sharded across
torch.distributed ranks and DataLoader workers so that every object is read exactly once per
epoch; `S3MapDataset` gives random access by index. Both hand `transform` the object's bytes
(a `ReadResult`, buffer protocol) or, for tar shards, ``{"__key__": ..., "<ext>": bytes}``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch.utils.data

from native_loader.cache import DEFAULT_CACHE_BYTES, CacheSpec, read_through, stream_through
from native_loader.config import Credentials, ReaderConfig
from native_loader.reader import ObjectInfo, S3Reader
from native_loader.records import RECORD_FORMATS, RecordFormat, iter_records
from native_loader.tar import iter_samples, iter_samples_stream
from native_loader.uri import is_metadata

Transform = Callable[[Any], Any]
Source = str | Iterable[str] | Iterable[ObjectInfo]


def _resolve(source: Source, reader: S3Reader, tar_only: bool = False) -> list[str | ObjectInfo]:
    """The objects of a source; listed ones keep their size (it lets large reads start at once).
    A listed prefix leaves out metadata (`is_metadata`: ``_SUCCESS``, ``.DS_Store``, ...), as the
    profile does; with `tar_only` it yields only ``.tar`` objects: a shard folder also holds its
    index (``shards.json``, ``classes.json``)."""
    if isinstance(source, str):
        listed = (
            info
            for info in reader.list(source)
            if not info.uri.endswith("/") and not is_metadata(info.uri, source)
        )
        return [i for i in listed if not tar_only or i.uri.endswith(".tar")]
    return [item if isinstance(item, ObjectInfo) else str(item) for item in source]


def _uri(item: str | ObjectInfo) -> str:
    return item.uri if isinstance(item, ObjectInfo) else item


def _distributed() -> tuple[int, int]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class S3IterableDataset(torch.utils.data.IterableDataset[Any]):
    """Streams the objects under a prefix (or of a list of URIs).

    Args:
        source: ``s3://bucket/prefix/`` (listed on first use), a local path prefix, or an
            iterable of URIs / `ObjectInfo`.
        config, credentials: for the `S3Reader` (one per process, created lazily).
        transform: applied to each item (default: items as they are).
        shuffle: shuffle the object order each epoch (seeded by ``seed`` and the epoch).
        seed: base seed for shuffling.
        shuffle_buffer: with N > 0, items also pass through an N-item shuffle buffer.
        tar_samples: objects are WebDataset tar shards; yield their samples, each as soon as its
            members have arrived (the shard is streamed, not read whole).
        records: objects are text shards; yield their records as they arrive: ``"lines"``
            (``str``), ``"jsonl"`` (parsed JSON) or ``"csv"`` (a ``dict`` per row). See
            `native_loader.records`.
        rank, world_size: this process's share; default from torch.distributed (or 0 of 1).
        cache_dir, cache_max_bytes: keep a copy of every object read in this local directory
            (at most cache_max_bytes, least recently used evicted), so that later epochs read
            from disk; the workers of a job share it. Default: no cache.

    Streamed shards (``tar_samples`` or ``records``) hold at most ``config.read_ahead_bytes``
    of each worker's shards in memory, not whole shards; the next shard's first parts are
    fetched while the current one is read. With a cache, they are copied to it as they stream
    and later epochs stream the local copy.
    Objects are split between ranks and DataLoader workers round-robin after shuffling, so
    each object is read exactly once per epoch across all of them. Call `set_epoch` before
    each epoch to reshuffle.
    """

    def __init__(
        self,
        source: Source,
        *,
        config: ReaderConfig | None = None,
        credentials: Credentials | None = None,
        transform: Transform | None = None,
        shuffle: bool = False,
        seed: int = 0,
        shuffle_buffer: int = 0,
        tar_samples: bool = False,
        records: RecordFormat | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_max_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        if shuffle_buffer < 0:
            raise ValueError(f"{shuffle_buffer=} must be >= 0")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and rank is not None and not 0 <= rank < world_size:
            raise ValueError(f"{rank=} must be in [0, {world_size=})")
        if records is not None and records not in RECORD_FORMATS:
            raise ValueError(f"{records=} must be one of {RECORD_FORMATS} or None")
        if records is not None and tar_samples:
            raise ValueError("records and tar_samples exclude each other")
        self._source: str | list[Any] = source if isinstance(source, str) else list(source)
        self._config = config if config is not None else ReaderConfig()
        self._credentials = credentials
        self.transform = transform
        self.shuffle = shuffle
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self.tar_samples = tar_samples
        self.records = records
        self._rank = rank
        self._world_size = world_size
        self.epoch = 0
        self._reader: S3Reader | None = None
        self._objects: list[str | ObjectInfo] | None = None
        self._cache = CacheSpec(cache_dir, cache_max_bytes)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose shuffle order the next iteration uses."""
        self.epoch = epoch

    @property
    def config(self) -> ReaderConfig:
        """The reader settings (requests in flight, part size, timeouts) of each process."""
        return self._config

    @property
    def reader(self) -> S3Reader:
        if self._reader is None:
            self._reader = S3Reader(self._config, credentials=self._credentials)
        return self._reader

    def uris(self) -> list[str]:
        """All object URIs of the data set (listed once, then cached).

        A prefix is listed on first use, i.e. in each DataLoader worker; call `uris()` once
        before creating the DataLoader to list in the parent and share the result with forked
        workers."""
        return [_uri(item) for item in self._resolved()]

    def _resolved(self) -> list[str | ObjectInfo]:
        if self._objects is None:
            self._objects = _resolve(self._source, self.reader, self.tar_samples)
        return self._objects

    def shard(self) -> tuple[int, int]:
        """(index, count) of this rank-and-worker among all readers of the epoch."""
        if self._rank is not None and self._world_size is not None:
            rank, world = self._rank, self._world_size
        else:
            rank, world = _distributed()
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank * workers + worker, world * workers

    def __iter__(self) -> Iterator[Any]:
        objects = list(self._resolved())
        if self.shuffle:
            random.Random(f"{self.seed}/{self.epoch}").shuffle(objects)
        index, count = self.shard()
        mine = objects[index::count]
        items = self._items(mine)
        if self.shuffle_buffer > 0:
            rng = random.Random(f"{self.seed}/{self.epoch}/{index}")
            items = _buffered_shuffle(items, self.shuffle_buffer, rng)
        for item in items:
            yield self.transform(item) if self.transform is not None else item

    def _items(self, objects: list[str | ObjectInfo]) -> Iterator[Any]:
        cache = self._cache.get()
        if self.tar_samples or self.records is not None:
            yield from self._streamed(objects)
            return
        stream = (
            read_through(self.reader, objects, cache)
            if cache is not None
            else self.reader.read_many(objects)
        )
        try:
            for result in stream:
                if self.tar_samples:
                    yield from iter_samples(result)
                elif self.records is not None:
                    yield from iter_records([result], self.records)
                else:
                    yield result
        finally:
            stream.close()  # type: ignore[attr-defined]

    def _streamed(self, objects: list[str | ObjectInfo]) -> Iterator[Any]:
        """Samples or records of each shard as its parts arrive (`S3Reader.open_many`)."""
        cache = self._cache.get()
        streams = (
            stream_through(self.reader, objects, cache)
            if cache is not None
            else self.reader.open_many(objects)
        )
        try:
            for stream in streams:
                if self.tar_samples:
                    yield from iter_samples_stream(stream)
                    for _ in stream.chunks():  # the end-of-archive padding: a cached copy is whole
                        pass
                else:
                    assert self.records is not None
                    yield from iter_records(stream.chunks(), self.records)
        finally:
            streams.close()  # type: ignore[attr-defined]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None  # each process makes its own
        return state


def _buffered_shuffle(items: Iterator[Any], size: int, rng: random.Random) -> Iterator[Any]:
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


class S3MapDataset(torch.utils.data.Dataset[Any]):
    """Random access to the objects under a prefix (listed on creation) or of a URI list."""

    def __init__(
        self,
        source: Source,
        *,
        config: ReaderConfig | None = None,
        credentials: Credentials | None = None,
        transform: Transform | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_max_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._config = config if config is not None else ReaderConfig()
        self._credentials = credentials
        self.transform = transform
        self._reader: S3Reader | None = None
        self._objects = _resolve(source, self.reader)
        self.uris = [_uri(item) for item in self._objects]
        self._cache = CacheSpec(cache_dir, cache_max_bytes)

    @property
    def config(self) -> ReaderConfig:
        """The reader settings (requests in flight, part size, timeouts) of each process."""
        return self._config

    @property
    def reader(self) -> S3Reader:
        if self._reader is None:
            self._reader = S3Reader(self._config, credentials=self._credentials)
        return self._reader

    def __len__(self) -> int:
        return len(self.uris)

    def __getitem__(self, index: int) -> Any:
        item = self._objects[index]
        cache = self._cache.get()
        if cache is not None:
            result = next(read_through(self.reader, [item], cache))
        else:
            result = self.reader.read(_uri(item))
        return self.transform(result) if self.transform is not None else result

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None
        return state

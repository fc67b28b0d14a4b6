"""PyTorch datasets over S3 (or local) objects, read with the native reader.

`S3IterableDataset` streams objects (or WebDataset samples of tar shards), sharded across
torch.distributed ranks and DataLoader workers so that every object is read exactly once per
epoch; `S3MapDataset` (`native_loader.map_dataset`) gives random access by index, on the parts
both share (`native_loader.dataset_parts`). Both hand `transform` the object's bytes
(a `ReadResult`, buffer protocol) or, for tar shards, ``{"__key__": ..., "<ext>": bytes}``.
A sample that fails to read or decode is raised naming the object, or skipped and counted, as
their `SamplePolicy` says (`native_loader.sample_errors`).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch.utils.data

from native_loader._client import shared_rate_limiter
from native_loader.cache import DEFAULT_CACHE_BYTES, CacheSpec, read_through, stream_through
from native_loader.config import Credentials, ReaderConfig
from native_loader.dataset_parts import (
    HandedObjects,
    OwnReader,
    Source,
    Transform,
    buffered_shuffle,
    distributed,
    index_spec,
    object_uri,
    resolve_source,
    shuffled_share,
)
from native_loader.listing import (
    DEFAULT_INDEX_MAX_AGE_S,
    IndexBuilder,
    ListingInfo,
    data_objects,
    given,
    listed_index,
    listing_head,
    said_wait,
    save_index,
    saved_index,
)
from native_loader.reader import ObjectInfo, S3Reader
from native_loader.records import RECORD_FORMATS, RecordFormat, record_blocks
from native_loader.sample_errors import (
    SampleCounts,
    SampleError,
    SampleGuard,
    SamplePolicy,
    failure,
    parsed_items,
    readable_name,
    unreadable_name,
)
from native_loader.stream import parsed_stream
from native_loader.tar import iter_samples_stream

# An iteration adds its samples to the shared counts this many at a time (and at its end).
_COUNT_FLUSH = 256
__all__ = ["OwnReader", "S3IterableDataset", "Source", "Transform", "object_uri", "resolve_source"]


class S3IterableDataset(OwnReader, torch.utils.data.IterableDataset[Any]):
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
        on_error: a `SamplePolicy` for samples that fail to read or decode. Default: raise
            `SampleError` naming the object; ``SamplePolicy("skip")`` skips and counts them
            (`sample_stats`), up to a share of the samples seen.
        index_dir, index_max_age_s, refresh_index: save a prefix's listing in this folder
            (default: ``cache_dir``; ``save_index=False``: none) and load it, while younger
            than ``index_max_age_s`` seconds (default 24 h), instead of listing again: in later
            epochs, runs and other ranks of a node (`native_loader.listing`). ``refresh_index``
            lists again.

    A prefix's listing is a compact `ObjectIndex` (flat buffers, no Python object per key),
    which forked DataLoader workers read without copying (`list_objects` lists it in the
    training process). Unshuffled, a prefix not yet listed is streamed: each process reads its
    share of every listing page as it arrives, so the first sample comes with the first page;
    shuffled, the read waits for the whole listing, and says so once, where that took a
    second or more (a warning of the ``native_loader`` logger). `listing` says where the
    objects came from and how old they are.
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
        on_error: SamplePolicy | None = None,
        index_dir: str | os.PathLike[str] | None = None,
        index_max_age_s: float = DEFAULT_INDEX_MAX_AGE_S,
        refresh_index: bool = False,
        save_index: bool = True,
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
        self._objects: Sequence[str | ObjectInfo] | None = None
        self._index = index_spec(index_dir, cache_dir, index_max_age_s, refresh_index, save_index)
        self.listing: ListingInfo | None = None
        self._cache = CacheSpec(cache_dir, cache_max_bytes, self._config.endpoint_url or "")
        self.on_error = on_error if on_error is not None else SamplePolicy()
        self.counts = SampleCounts()
        if self._config.adaptive_rate:
            shared_rate_limiter(self._config)  # made here, shared by the forked workers

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose shuffle order the next iteration uses."""
        self.epoch = epoch

    def uris(self) -> list[str]:
        """All object URIs of the data set (listed once, then kept), as a list: one Python
        string per object; `list_objects` lists without making them."""
        return [object_uri(item) for item in self._resolved()]

    def list_objects(self) -> int | None:
        """List the source now, in this process (or load its saved index), unless an
        unshuffled read can stream the listing instead; the number of objects, or None when
        the listing is left to stream. Call it before creating the DataLoader: forked workers
        share what it listed."""
        if self._objects is None and self._streams_listing():
            found = self._saved()
            if found is None:
                return None
            self._objects, self.listing = found
        return len(self._resolved())

    def _streams_listing(self) -> bool:
        return isinstance(self._source, str) and not self.shuffle

    def _saved(self) -> tuple[Sequence[str | ObjectInfo], ListingInfo] | None:
        assert isinstance(self._source, str)
        return saved_index(self._index, self._config, self._source, self.tar_samples)

    def _resolved(self) -> Sequence[str | ObjectInfo]:
        if self._objects is None:
            if isinstance(self._source, str):
                index, info = listed_index(self._source, self.reader, self.tar_samples, self._index)
                if self.shuffle:
                    said_wait(self._source, "a shuffled read", info, self._index)
                self._objects, self.listing = index, info
            else:
                self._objects = given(self._source)
                self.listing = ListingInfo("given", len(self._objects), 0.0)
        return self._objects

    def shard(self) -> tuple[int, int]:
        """(index, count) of this rank-and-worker among all readers of the epoch."""
        if self._rank is not None and self._world_size is not None:
            rank, world = self._rank, self._world_size
        else:
            rank, world = distributed()
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank * workers + worker, world * workers

    def __iter__(self) -> Iterator[Any]:
        guard = SampleGuard(
            self.on_error,
            self.counts,
            flush_every=_COUNT_FLUSH,
            reader_stats=self._own_reader_stats,
        )
        try:
            if self.records is not None and self.transform is None and not self.shuffle_buffer:
                # records as they are: a list per slice of text, no Python call per record
                for _, block in self._streamed(self._share(guard), guard):
                    guard.ok(len(block))
                    yield from block
                return
            for name, item in self.named_items(guard):
                if self.transform is None:
                    guard.ok()
                    yield item
                    continue
                done, out = guard.apply(self.transform, name, item)
                if done:
                    yield out
        finally:
            guard.flush()

    def named_items(self, guard: SampleGuard | None = None) -> Iterator[tuple[str, Any]]:
        """This process's share of the epoch, untransformed, each with the name of the object
        it came from (``<shard uri>#<key>`` for a tar sample). Reads that fail go to `guard`
        (default: this dataset's policy)."""
        if guard is None:
            guard = SampleGuard(self.on_error, self.counts, reader_stats=self._own_reader_stats)
        items = self._items(self._share(guard), guard)
        if self.shuffle_buffer > 0:
            rng = random.Random(f"{self.seed}/{self.epoch}/{self.shard()[0]}")
            items = buffered_shuffle(items, self.shuffle_buffer, rng)
        yield from items

    def _share(self, guard: SampleGuard) -> Iterator[str | ObjectInfo]:
        """This process's objects of the epoch, in order, each made as it is read; names no
        reader can open go to `guard`."""
        index, count = self.shard()
        if self._objects is None and self._streams_listing():
            found = self._saved()
            if found is not None:
                self._objects, self.listing = found
        if self._objects is None and self._streams_listing():
            items: Iterator[str | ObjectInfo] = self._listing_share(index, count)
        else:
            objects = self._resolved()
            positions: Iterable[int] = (
                shuffled_share(len(objects), f"{self.seed}/{self.epoch}", index, count)
                if self.shuffle
                else range(index, len(objects), count)
            )
            items = (objects[position] for position in positions)
        for item in items:
            if readable_name(object_uri(item)):
                yield item
            else:
                error = unreadable_name(object_uri(item))
                guard.failed(str(error), error)

    def _listing_share(self, index: int, count: int) -> Iterator[ObjectInfo]:
        """This process's share of the listing as its pages arrive: object i of the listing
        goes to reader i mod count, as an unshuffled epoch deals them. The whole listing is
        kept (compact) for the epochs after it; the first reader saves it where it may."""
        assert isinstance(self._source, str)
        source, started, asked = self._source, time.monotonic(), time.time()
        builder = IndexBuilder(listing_head(source))
        for number, info in enumerate(data_objects(source, self.reader, self.tar_samples)):
            builder.add(info)
            if number % count == index:
                yield info
        objects, seconds = builder.build(), time.monotonic() - started
        path = None
        if index == 0:
            path = save_index(
                objects, self._index, self._config, source, self.tar_samples, asked, seconds
            )
        self._objects, self.listing = objects, ListingInfo("listed", len(objects), seconds, 0, path)

    def _items(
        self, objects: Iterable[str | ObjectInfo], guard: SampleGuard
    ) -> Iterator[tuple[str, Any]]:
        """Read `objects` in order; a failed read is raised as it is (it names the object), or
        skipped, and the reads go on after it."""
        cache = self._cache.get()
        if self.tar_samples:
            yield from self._streamed(objects, guard)
            return
        if self.records is not None:
            for uri, block in self._streamed(objects, guard):
                for record in block:
                    yield uri, record
            return
        queue = HandedObjects(objects)
        while True:
            handed = queue.hand()
            stream = (
                read_through(self.reader, list(handed), cache)
                if cache is not None
                else self.reader.read_many(handed)
            )
            try:
                for result in stream:
                    queue.done()
                    yield result.uri, result
                return
            except SampleError:
                raise
            except Exception as exc:
                if queue.failure is not None or not queue.taken:
                    raise  # not a read's failure: the listing's, or nothing was handed
                failed = object_uri(queue.done())
                if self.on_error.on_error == "raise":
                    raise
                guard.failed(failure("reading", failed, exc), exc)
            finally:
                stream.close()  # type: ignore[attr-defined]

    def _streamed(
        self, shards: Iterable[str | ObjectInfo], guard: SampleGuard
    ) -> Iterator[tuple[str, Any]]:
        """Samples of each tar shard, or lists of records of each text shard, as its parts
        arrive (`S3Reader.open_many`, or the cache's `stream_through`). A shard that
        fails to read is raised as it is, or skipped and the reads go on after it; one that
        fails to parse goes to `guard`."""
        objects = list(shards)  # shards: few, and each read for long
        cache = self._cache.get()
        # records: fewer, larger parts, two in flight (stream.parsed_stream)
        parts: dict[str, int] = {}
        if self.records is not None:
            part, read_ahead = parsed_stream(self.config)
            parts = {"part_size": part, "read_ahead_bytes": read_ahead}
        position = 0
        while position < len(objects):
            rest = objects[position:]
            streams = (
                stream_through(self.reader, rest, cache, **parts)
                if cache is not None
                else self.reader.open_many(rest, **parts)
            )
            current = position
            try:
                for current, stream in enumerate(streams, position):
                    yield from self._shard_items(object_uri(objects[current]), stream, guard)
                return
            except SampleError:
                raise
            except Exception as exc:
                position = current + 1
                if self.on_error.on_error == "raise":
                    raise
                guard.failed(failure("reading", object_uri(objects[current]), exc), exc)
            finally:
                streams.close()  # type: ignore[attr-defined]

    def _shard_items(self, uri: str, stream: Any, guard: SampleGuard) -> Iterator[tuple[str, Any]]:
        if self.tar_samples:
            samples = iter_samples_stream(stream)
            for sample in parsed_items(samples, "reading the tar shard", uri, guard):
                yield f"{uri}#{sample['__key__']}", sample
            for _ in stream.chunks():  # the end-of-archive padding: a cached copy is whole
                pass
            return
        assert self.records is not None
        what = f"reading {self.records} records"

        def bad_record(exc: Exception) -> None:
            # one broken JSON line is one sample: skipped and counted alone, the lines after
            # it read on
            guard.failed(failure(what, uri, exc), exc)

        blocks = record_blocks(stream.chunks(), self.records, on_bad=bad_record)
        for block in parsed_items(blocks, what, uri, guard):
            yield uri, block

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None  # each process makes its own
        return state

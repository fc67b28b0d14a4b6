"""`S3MapDataset`: random access by index to the objects under a prefix or of a URI list, read
with the native reader (the streaming dataset and what both share: `native_loader.datasets`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch.utils.data

from native_loader._client import shared_rate_limiter
from native_loader.cache import DEFAULT_CACHE_BYTES, CacheSpec, read_through
from native_loader.config import Credentials, ReaderConfig
from native_loader.dataset_parts import OwnReader, Source, Transform, index_spec, object_uri
from native_loader.listing import (
    DEFAULT_INDEX_MAX_AGE_S,
    ListingInfo,
    given,
    listed_index,
    said_wait,
)
from native_loader.reader import ObjectInfo, S3Reader
from native_loader.sample_errors import (
    SampleCounts,
    SampleGuard,
    SamplePolicy,
    failure,
    readable_name,
    unreadable_name,
)


class S3MapDataset(OwnReader, torch.utils.data.Dataset[Any]):
    """Random access to the objects under a prefix (listed on creation, or loaded from the
    listing saved in ``index_dir``, by default ``cache_dir``: see `S3IterableDataset`) or of a
    URI list. A prefix's objects are a compact `ObjectIndex` that forked DataLoader workers
    read without copying; `listing` says where they came from and how old they are."""

    def __init__(
        self,
        source: Source,
        *,
        config: ReaderConfig | None = None,
        credentials: Credentials | None = None,
        transform: Transform | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_max_bytes: int = DEFAULT_CACHE_BYTES,
        on_error: SamplePolicy | None = None,
        index_dir: str | os.PathLike[str] | None = None,
        index_max_age_s: float = DEFAULT_INDEX_MAX_AGE_S,
        refresh_index: bool = False,
    ) -> None:
        self._config = config if config is not None else ReaderConfig()
        self._credentials = credentials
        self.transform = transform
        self._reader: S3Reader | None = None
        spec = index_spec(index_dir, cache_dir, index_max_age_s, refresh_index)
        self._objects: Sequence[str | ObjectInfo]
        if isinstance(source, str):
            self._objects, self.listing = listed_index(source, self.reader, False, spec)
            said_wait(source, "random access", self.listing, spec)
        else:
            self._objects = given(source)
            self.listing = ListingInfo("given", len(self._objects), 0.0)
        self._cache = CacheSpec(cache_dir, cache_max_bytes, self._config.endpoint_url or "")
        self.on_error = on_error if on_error is not None else SamplePolicy()
        self.counts = SampleCounts()
        if self._config.adaptive_rate:
            shared_rate_limiter(self._config)  # made here, shared by the forked workers
        self._guard: SampleGuard | None = None

    @property
    def uris(self) -> list[str]:
        """Every object's URI, as a list (one Python string per object)."""
        return [object_uri(item) for item in self._objects]

    def __len__(self) -> int:
        return len(self._objects)

    def __getitem__(self, index: int) -> Any:
        """The item at `index`; None for a sample skipped by ``SamplePolicy("skip")``
        (`collate_list` leaves it out of the batch)."""
        item = self._objects[index]
        if self._guard is None:  # per process: each DataLoader worker counts its own share
            self._guard = SampleGuard(
                self.on_error, self.counts, reader_stats=self._own_reader_stats
            )
        guard, uri = self._guard, object_uri(item)
        if not readable_name(uri):
            error = unreadable_name(uri)
            guard.failed(str(error), error)
            return None
        cache = self._cache.get()
        try:
            if cache is not None:
                result = next(read_through(self.reader, [item], cache))
            else:
                result = self.reader.read(uri)
        except Exception as exc:
            if self.on_error.on_error == "raise":
                raise
            guard.failed(failure("reading", uri, exc), exc)
            return None
        if self.transform is None:
            guard.ok()
            return result
        return guard.apply(self.transform, uri, result)[1]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = state["_guard"] = None
        return state

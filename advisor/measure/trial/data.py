"""What every measurement of a trial reads (`TrialData`: its objects, reader and transform),
and the trial's clock (`TrialClock`: budget shares, cancellation, progress events). Below the
probes, the sweep and the run, which all take them."""

from __future__ import annotations

import dataclasses
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from advisor.core.location import DatasetLocation
from advisor.measure.trial.results import LoaderPoint
from native_loader import Credentials, ObjectInfo, ReaderConfig, S3Reader
from native_loader.loader import make_dataset
from native_loader.uri import is_metadata

SAMPLE_KEYS = 4000  # keys listed to draw trial objects from
LIST_SECONDS = 5.0


@dataclass(frozen=True)
class TrialEvent:
    """A progress report from a running trial, for progress bars and live charts.

    phase: "storage" | "decode" | "copy" | "sweep" | "h2d" | "done" ("copy": a local copy of a
    sample, or the sample packed into tar shards, where training reads one, and its storage
    probe); fraction: overall progress in [0, 1];
    point: set when a DataLoader configuration of the sweep has just been measured.
    """

    phase: str
    fraction: float
    message: str
    point: LoaderPoint | None = None


TrialProgress = Callable[[TrialEvent], None]


class TrialCancelled(Exception):
    """Raised inside the trial to unwind when the caller's cancel event is set."""


@dataclass
class TrialClock:
    """The trial's budget: phases get shares; cancellation is checked at every bounded step."""

    seconds: float
    cancel: threading.Event | None
    progress: TrialProgress | None
    started: float = field(default_factory=time.monotonic)

    def used(self) -> float:
        return time.monotonic() - self.started

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise TrialCancelled

    def report(self, phase: str, message: str, point: LoaderPoint | None = None) -> None:
        if self.progress is not None:
            fraction = min(1.0, self.used() / self.seconds)
            self.progress(TrialEvent(phase, fraction, message, point))


@dataclass(frozen=True)
class TrialData:
    """What every measurement of a trial reads, and how: its objects, reader and transform."""

    objects: tuple[ObjectInfo, ...]
    config: ReaderConfig
    fmt: str
    transform: Callable[[Any], Any]
    credentials: Credentials | None = field(default=None, repr=False)
    # Training samples in one item the dataset yields: 1 for single-sample objects, tar
    # members and records; the records of a line-oriented object decoded as one item.
    samples_per_item: float = 1.0
    # text shards read as records (`S3IterableDataset(records=...)`: "lines", "jsonl", "csv"):
    # one item is one record, so the sweep's samples/s are records/s; None: objects or tar samples
    records: str | None = None
    # How many of `objects`' kind one epoch of training reads per rank (the data set's count;
    # shards for a packed sample); None: unknown. A loader cycles the sample to this length, so
    # that its epochs end where training's do (`dataset`).
    epoch_objects: int | None = None

    @classmethod
    def sample(
        cls,
        location: DatasetLocation,
        fmt: str,
        transform: Callable[[Any], Any],
        credentials: Credentials | None = None,
    ) -> TrialData:
        """A seeded, shuffled sample of the data set's non-empty objects (bounded listing)."""
        config = location.reader_config()
        objects: list[ObjectInfo] = []
        deadline = time.monotonic() + LIST_SECONDS
        with S3Reader(config, credentials=credentials) as reader:
            listed = location.prefix_uri()
            for info in reader.list(listed):
                if info.size > 0 and not is_metadata(info.uri, listed):
                    objects.append(info)
                if len(objects) >= SAMPLE_KEYS or time.monotonic() > deadline:
                    break
        if not objects:
            raise FileNotFoundError(f"no non-empty objects under {location.uri!r} for a trial")
        random.Random(0).shuffle(objects)
        return cls(tuple(objects), config, fmt, transform, credentials)

    @property
    def streamed(self) -> bool:
        """True when the dataset streams its objects (tar samples, text records): a loader
        process holds its reader's read-ahead of them, never a whole one."""
        return self.fmt == "tar" or self.records is not None

    def items_per_batch(self, batch_size: int) -> int:
        """DataLoader items that make a batch of `batch_size` samples (at least one)."""
        return max(1, round(batch_size / self.samples_per_item))

    @property
    def mean_object_bytes(self) -> float:
        """The sampled objects' mean size (0 for none): what the reader settings are sized for."""
        return statistics.fmean(o.size for o in self.objects) if self.objects else 0.0

    def with_inflight(self, requests: int, budget_bytes: int | None = None) -> TrialData:
        """The same data read with `requests` in flight per reader (each loader process), and
        `budget_bytes` as its byte budget (max_inflight_bytes) when given."""
        config = dataclasses.replace(self.config, max_inflight_requests=requests)
        if budget_bytes is not None:
            config = dataclasses.replace(config, max_inflight_bytes=budget_bytes)
        return dataclasses.replace(self, config=config)

    def reader(self, **overrides: Any) -> S3Reader:
        config = dataclasses.replace(self.config, **overrides) if overrides else self.config
        return S3Reader(config, credentials=self.credentials)

    def _epoch(self, min_objects: int) -> list[ObjectInfo]:
        """The objects one epoch of `dataset(min_objects=...)` reads, in order."""
        objects = list(self.objects)
        if self.fmt == "tar":  # a shard folder's index and bookkeeping are not shards
            objects = [o for o in objects if o.uri.endswith(".tar")] or objects
        length = min(min_objects, self.epoch_objects or min_objects)
        if objects and len(objects) < length:
            objects = (objects * -(-length // len(objects)))[:length]
        return objects

    def epoch_samples(self, min_objects: int = 0) -> float | None:
        """Training samples in one epoch of `dataset(min_objects=...)`; None where the objects
        are streamed (tar samples, records): how many they hold is known once they are read."""
        if self.streamed:
            return None
        return len(self._epoch(min_objects)) * self.samples_per_item

    def dataset(
        self, transform: Callable[[Any], Any] | None = None, min_objects: int = 0
    ) -> Iterable[Any]:
        """Tar shards iterate as WebDataset samples, text shards with `records` as records (a
        line, a parsed JSON line, a CSV row); everything else one object per sample.

        With `min_objects`, the sample is cycled up to that length, so that a time-bounded
        measurement of a set with few (large) objects is not cut short by its end; but never
        past `epoch_objects`: an epoch of the loader is then one of training's, its end and the
        next one's start included (a loader whose readers are refilled at every epoch's start
        loads at another rate than one reading an endless list).
        """
        return make_dataset(
            # Listed objects (with their sizes), as the datasets read a prefix: a read of unknown
            # size reserves a whole part of the byte budget until it answers, which would cap
            # small objects at max_inflight_bytes / part_size requests in flight.
            self._epoch(min_objects),
            config=self.config,
            credentials=self.credentials,
            transform=transform,
            tar_samples=self.fmt == "tar",
            records=self.records,
        )

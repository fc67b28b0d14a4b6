"""Dataset profile: how many objects, how big, what format, how spread over prefixes."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.core.bounds import ListingLimits
from advisor.core.location import DatasetLocation
from advisor.measure.formats import (
    HEAD_BYTES,
    by_extension,
    by_magic,
    record_format,
    samples_in_head,
)
from native_loader import ObjectInfo, S3Reader, parse_uri
from native_loader.sample_errors import check_name
from native_loader.uri import is_metadata


@dataclass(frozen=True)
class SizeStats:
    """Object size distribution in bytes: percentiles and a log2-binned histogram."""

    min: int
    p50: int
    p90: int
    p99: int
    max: int
    mean: float
    # histogram: (lower bound in bytes, count) per power-of-two bin, ascending
    histogram: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class FormatInfo:
    """One detected format: by extension and, for sampled objects, by magic bytes."""

    # "jpeg", "png", "tar", "tfrecord", "parquet", "npy", "mds", "recordio", "jsonl", "text",
    # "binary" (no known signature)
    name: str
    objects: int  # objects (in the listed sample) with this format
    bytes: int
    samples_per_object: float | None = None  # tar members / lines / records where it can tell
    # text shards read as records (`formats.record_format`): "lines", "jsonl", "csv"; else None
    records: str | None = None

    @property
    def bytes_per_record(self) -> float | None:
        """Mean bytes per record (or tar sample) where the samples per object are known."""
        if not self.samples_per_object or not self.objects:
            return None
        return self.bytes / self.objects / self.samples_per_object


@dataclass(frozen=True)
class DatasetProfile:
    """What the listing (and a few sampled reads) says about a data set.

    When the listing stopped at its key or time limit, `sampled` is True and `object_count` and
    `total_bytes` are extrapolated where the listing finished some first-level prefixes, else
    lower bounds (`count_basis`, said in `objects_said`); `listed_objects` is what was seen.
    """

    uri: str
    storage: str  # "s3" or "local"
    object_count: int
    total_bytes: int
    sizes: SizeStats
    formats: tuple[FormatInfo, ...]
    distinct_prefixes: (
        int  # first-level "directories" under the URI (request-rate ceiling per prefix)
    )
    listed_objects: int
    sampled: bool = False
    list_seconds: float = 0.0
    endpoint_url: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def count_basis(self) -> str:
        """How `object_count` (and `total_bytes`, `samples_estimate`) was found: "listed" (every
        object: exact), "extrapolated" (a stopped listing scaled over its first-level prefixes:
        an estimate) or "lower bound" (a stopped listing that could not be scaled: the set
        holds at least that many)."""
        if not self.sampled:
            return "listed"
        return "extrapolated" if self.object_count > self.listed_objects else "lower bound"

    @property
    def estimate_word(self) -> str:
        """What goes before a count or total of the set: "", "about " or "at least "."""
        return {"listed": "", "extrapolated": "about ", "lower bound": "at least "}[
            self.count_basis
        ]

    @property
    def objects_said(self) -> str:
        """The set's size in words, with its basis: "1,234 objects (all listed)", "at least
        200,000 objects (the listing was stopped at 200,000: a sample)", "about 1,000,000
        objects (extrapolated from the 200,000 listed: a sample)"."""
        listed = f"{self.listed_objects:,}"
        basis = {
            "listed": "all listed",
            "lower bound": f"the listing was stopped at {listed}: a sample",
            "extrapolated": f"extrapolated from the {listed} listed before the listing was "
            "stopped: a sample",
        }[self.count_basis]
        return f"{self.estimate_word}{self.object_count:,} objects ({basis})"

    def to_dict(self) -> dict[str, Any]:
        """The profile as JSON: its fields, and its size's basis (`count_basis`) in words."""
        return {
            **dataclasses.asdict(self), "count_basis": self.count_basis,
            "objects_said": self.objects_said,
        }  # fmt: skip

    @property
    def mean_object_bytes(self) -> float:
        return self.total_bytes / self.object_count if self.object_count else 0.0

    @property
    def dominant_format(self) -> str:
        if not self.formats:
            return "unknown"
        return max(self.formats, key=lambda f: f.bytes).name

    @property
    def record_format(self) -> str | None:
        """How the dominant format is read as records (``"lines"``, ``"jsonl"``, ``"csv"``):
        a set of text shards, streamed record by record; None for other sets."""
        if not self.formats:
            return None
        return max(self.formats, key=lambda f: f.bytes).records

    @property
    def samples_estimate(self) -> int:
        """Training samples in the set: objects times samples per container where known."""
        total = 0.0
        for fmt in self.formats:
            per = fmt.samples_per_object or 1.0
            share = fmt.objects / max(self.listed_objects, 1)
            total += share * self.object_count * per
        return round(total) if self.formats else self.object_count


# --- profiling ---------------------------------------------------------------------------------

Progress = Callable[[str, float], None]  # (message, fraction done in [0, 1])

DEFAULT_MAX_KEYS = ListingLimits.max_keys
DEFAULT_MAX_SECONDS = 20.0
DEFAULT_SAMPLE_OBJECTS = 6


class EmptyDatasetError(FileNotFoundError):
    """The prefix or folder exists (or may) but holds no objects."""


def _percentile(sorted_sizes: list[int], q: float) -> int:
    index = min(len(sorted_sizes) - 1, max(0, round(q * (len(sorted_sizes) - 1))))
    return sorted_sizes[index]


def size_stats(sizes: list[int]) -> SizeStats:
    ordered = sorted(sizes)
    bins: dict[int, int] = {}
    for size in ordered:
        lower = 0 if size == 0 else 1 << (size.bit_length() - 1)
        bins[lower] = bins.get(lower, 0) + 1
    return SizeStats(
        min=ordered[0],
        p50=_percentile(ordered, 0.5),
        p90=_percentile(ordered, 0.9),
        p99=_percentile(ordered, 0.99),
        max=ordered[-1],
        mean=sum(ordered) / len(ordered),
        histogram=tuple(sorted(bins.items())),
    )


def _first_level(key: str, prefix: str) -> str:
    rest = key[len(prefix) :] if key.startswith(prefix) else key
    return rest.split("/", 1)[0] if "/" in rest else ""


def _key_prefix(uri: str) -> str:
    """The key prefix of an s3:// URI ("" for a whole bucket)."""
    return parse_uri(uri)[2]


def profile_dataset(
    location: DatasetLocation,
    reader: S3Reader,
    *,
    max_keys: int = DEFAULT_MAX_KEYS,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    sample_objects: int = DEFAULT_SAMPLE_OBJECTS,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> DatasetProfile:
    """List the data set (up to `max_keys` keys / `max_seconds`) and sniff a few objects.

    A listing cut short by a limit is a sample: totals are extrapolated over first-level prefixes
    when the listing finished some of them, and the profile says so in `sampled` and `notes`.
    """
    ListingLimits(max_keys)  # raises ValueError naming the range
    if max_seconds <= 0 or sample_objects < 0:
        raise ValueError(f"{max_seconds=} must be > 0, {sample_objects=} >= 0")
    uri = location.prefix_uri()
    if location.is_s3 and not uri.endswith("/") and _key_prefix(uri):
        # "s3://bucket/images" means the folder, not every key starting with "images".
        uri += "/"
    prefix = _key_prefix(uri) if location.is_s3 else uri.rstrip("/") + "/"
    started = time.monotonic()
    objects: list[ObjectInfo] = []
    truncated = False
    stop = ""
    hidden = 0
    for info in reader.list(uri):
        if info.key.endswith("/") and info.size == 0:
            continue  # "folder" marker objects are not data
        if is_metadata(info.uri, uri):
            hidden += 1
            continue
        check_name(info.uri)  # a file name that is not UTF-8: no reader can open it
        objects.append(info)
        if len(objects) % 5000 == 0 and progress:
            progress(f"listed {len(objects):,} objects", min(0.8, len(objects) / max_keys))
        stop = _stopped_by(len(objects), max_keys, time.monotonic() - started, max_seconds, cancel)
        if stop:
            truncated = True
            break
    list_seconds = time.monotonic() - started
    if not objects:
        raise EmptyDatasetError(f"no objects under {location.uri!r}: check the prefix or folder")
    notes: list[str] = []
    if hidden:
        notes.append(f"left out {hidden:,} metadata objects (a path part starting with _ or .)")
    count, total = len(objects), sum(o.size for o in objects)
    first_levels = [_first_level(o.key if location.is_s3 else o.uri, prefix) for o in objects]
    distinct = len(set(first_levels))
    if truncated:
        count, total, note = _extrapolate(objects, first_levels, reader, uri, stop)
        notes.append(note)
    if progress:
        progress("sniffing formats", 0.85)
    formats = _formats(objects, reader, sample_objects)
    if progress:
        progress("profile done", 1.0)
    return DatasetProfile(
        uri=location.uri,
        storage=location.storage,
        object_count=count,
        total_bytes=total,
        sizes=size_stats([o.size for o in objects]),
        formats=formats,
        distinct_prefixes=distinct,
        listed_objects=len(objects),
        sampled=truncated,
        list_seconds=list_seconds,
        endpoint_url=location.endpoint_url,
        notes=tuple(notes),
    )


def _stopped_by(
    listed: int, max_keys: int, seconds: float, max_seconds: float, cancel: threading.Event | None
) -> str:
    """What stops the listing now, in words ("" while nothing does)."""
    if listed >= max_keys:
        return f"its limit of {max_keys:,} keys (--max-keys)"
    if seconds > max_seconds:
        return f"its limit of {max_seconds:g} s"
    return "a cancel" if cancel is not None and cancel.is_set() else ""


def _extrapolate(
    objects: list[ObjectInfo], first_levels: list[str], reader: S3Reader, uri: str, stop: str
) -> tuple[int, int, str]:
    """Totals for a listing cut short (by `stop`, in words): scale finished first-level
    prefixes to all of them, or else say that the totals are lower bounds."""
    seen = len(objects)
    seen_bytes = sum(o.size for o in objects)
    last = first_levels[-1]
    finished = [i for i, level in enumerate(first_levels) if level != last]
    all_levels: list[str] = []
    if finished and last:
        try:
            all_levels = [i.key for i in reader.list(uri, delimiter="/", max_keys=100_000)]
        except OSError:
            all_levels = []
    done_levels = len(set(first_levels)) - 1
    if finished and len(all_levels) > done_levels > 0:
        per_level = len(finished) / done_levels
        bytes_per_object = sum(objects[i].size for i in finished) / len(finished)
        count = max(seen, round(per_level * len(all_levels)))
        note = (
            f"sampled: the listing was stopped at {seen:,} objects by {stop}, {done_levels} of "
            f"{len(all_levels)} top-level folders listed whole; totals extrapolated to about "
            f"{count:,} objects"
        )
        return count, max(seen_bytes, round(count * bytes_per_object)), note
    note = (
        f"sampled: the listing was stopped at {seen:,} objects by {stop}; the data set holds at "
        "least this many (its counts and totals are lower bounds)"
    )
    return seen, seen_bytes, note


def _formats(
    objects: list[ObjectInfo], reader: S3Reader, sample_objects: int
) -> tuple[FormatInfo, ...]:
    """Formats by extension for every object, confirmed by magic bytes on a few sampled ones."""
    by_ext: dict[str, list[ObjectInfo]] = {}
    for info in objects:
        by_ext.setdefault(by_extension(info.key) or "binary", []).append(info)
    result = []
    for name, group in sorted(by_ext.items(), key=lambda item: -sum(o.size for o in item[1])):
        step = max(1, len(group) // max(sample_objects, 1))
        sampled = group[::step][:sample_objects]
        sniffed: list[str] = []
        samples: list[float] = []
        for info in sampled:
            if info.size == 0:
                continue
            head = bytes(reader.read_range(info.uri, 0, min(info.size, HEAD_BYTES)))
            magic = by_magic(head) or name
            sniffed.append(magic)
            per = samples_in_head(magic, head, info.size)
            if per is not None:
                samples.append(per)
        detected = max(set(sniffed), key=sniffed.count) if sniffed else name
        per_object = sum(samples) / len(samples) if samples else None
        result.append(
            FormatInfo(
                name=detected,
                objects=len(group),
                bytes=sum(o.size for o in group),
                samples_per_object=per_object,
                records=record_format(detected, group[0].key, per_object),
            )
        )
    return tuple(result)

"""Dataset profile: how many objects, how big, what format, how spread over prefixes."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class DatasetProfile:
    """What the listing (and a few sampled reads) says about a data set.

    When the listing stopped at its key or time limit, `sampled` is True and `object_count` and
    `total_bytes` are extrapolated; `listed_objects` is what was actually seen.
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
    def mean_object_bytes(self) -> float:
        return self.total_bytes / self.object_count if self.object_count else 0.0

    @property
    def dominant_format(self) -> str:
        if not self.formats:
            return "unknown"
        return max(self.formats, key=lambda f: f.bytes).name

    @property
    def samples_estimate(self) -> int:
        """Training samples in the set: objects times samples per container where known."""
        total = 0.0
        for fmt in self.formats:
            per = fmt.samples_per_object or 1.0
            share = fmt.objects / max(self.listed_objects, 1)
            total += share * self.object_count * per
        return round(total) if self.formats else self.object_count

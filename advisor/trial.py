"""Live loader trial: storage probe, per-sample CPU cost, DataLoader sweep, host-to-device copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StorageProbe:
    """What the native reader measured against the storage, on real objects of the set."""

    objects_read: int
    bytes_read: int
    first_byte_p50_s: float
    first_byte_p95_s: float
    per_connection_mb_s: float  # one request at a time, MB/s (10^6 bytes)
    # (concurrency, aggregate MB/s, objects/s) as concurrency rises
    concurrency_curve: tuple[tuple[int, float, float], ...] = ()

    @property
    def best_mb_s(self) -> float:
        return max((mb for _, mb, _ in self.concurrency_curve), default=self.per_connection_mb_s)

    @property
    def best_objects_s(self) -> float:
        return max((ops for _, _, ops in self.concurrency_curve), default=0.0)


@dataclass(frozen=True)
class DecodeCost:
    """CPU time per sample of the decode/transform step, measured in-process on sampled data."""

    transform: str  # "module:callable" or the default decoder's name
    samples: int
    cpu_s_per_sample: float
    bytes_per_sample: float


@dataclass(frozen=True)
class LoaderPoint:
    """One DataLoader configuration tried in the sweep."""

    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    samples: int
    seconds: float
    samples_per_s: float
    mb_per_s: float
    time_to_first_batch_s: float
    peak_worker_rss_mb: float


@dataclass(frozen=True)
class HostToDevice:
    """Host-to-device copy bandwidth (GB/s) of a batch-sized tensor, pinned vs pageable."""

    batch_bytes: int
    pinned_gb_s: float
    pageable_gb_s: float


@dataclass(frozen=True)
class TrialResult:
    """Everything the trial measured; a part is None when the budget ran out or it was cancelled."""

    uri: str
    seconds_budget: float
    seconds_used: float
    storage: StorageProbe | None = None
    decode: DecodeCost | None = None
    sweep: tuple[LoaderPoint, ...] = ()
    host_to_device: HostToDevice | None = None
    cancelled: bool = False
    notes: tuple[str, ...] = field(default=())

    def best_point(self) -> LoaderPoint | None:
        return max(self.sweep, key=lambda p: p.samples_per_s, default=None)


@dataclass(frozen=True)
class TrialEvent:
    """A progress report from a running trial, for progress bars and live charts.

    phase: "storage" | "decode" | "sweep" | "h2d" | "done"; fraction: overall progress in [0, 1];
    point: set when a DataLoader configuration of the sweep has just been measured.
    """

    phase: str
    fraction: float
    message: str
    point: LoaderPoint | None = None


TrialProgress = Callable[[TrialEvent], None]

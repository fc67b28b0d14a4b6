"""How one storage answers one reader (`StorageParams`), and the model's defaults for each kind
of storage when the trial measured none."""

from __future__ import annotations

from dataclasses import dataclass

from native_loader.config import ReaderConfig
from native_loader.local_pool import LOCAL_THREADS

__all__ = [
    "EFS_DEFAULTS",
    "HDD_DEFAULTS",
    "LOCAL_NVME_DEFAULTS",
    "LOCAL_READ_THREADS",
    "LOCAL_SSD_DEFAULTS",
    "S3_DEFAULTS",
    "SHARED_FS_DEFAULTS",
    "StorageParams",
]

READER_INFLIGHT: int = ReaderConfig.max_inflight_requests
# The native reader reads local files ahead on this many threads per process (`native_loader.
# local`): however many requests it may keep in flight, no more local reads run at once.
LOCAL_READ_THREADS: int = LOCAL_THREADS


@dataclass(frozen=True)
class StorageParams:
    """How one storage answers one reader.

    first_byte_s: time to first byte of a GET/open+read, seconds.
    per_connection_mb_s: bandwidth of one request once data flows, MB/s (10^6 bytes).
    requests_in_flight: requests the reader keeps open per loader process (the native reader
        pipelines several; a plain ``open().read()`` dataset has 1).
    aggregate_mb_s: ceiling over all connections of the node (NIC, device, volume); None = none.
    measured: True when the numbers come from the trial's storage probe.
    local: files on this node (a local disk, or a local copy): the native reader reads at most
        LOCAL_READ_THREADS of them at once per process, whatever `requests_in_flight` allows.
    """

    name: str
    first_byte_s: float
    per_connection_mb_s: float
    requests_in_flight: int = 1
    aggregate_mb_s: float | None = None
    measured: bool = False
    local: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.first_byte_s <= 60:
            raise ValueError(f"first_byte_s={self.first_byte_s} must be in [0, 60]")
        if not self.per_connection_mb_s > 0:
            raise ValueError(f"per_connection_mb_s={self.per_connection_mb_s} must be > 0")
        if self.requests_in_flight < 1:
            raise ValueError(f"requests_in_flight={self.requests_in_flight} must be >= 1")
        if self.aggregate_mb_s is not None and not self.aggregate_mb_s > 0:
            raise ValueError(f"aggregate_mb_s={self.aggregate_mb_s} must be > 0 or None")

    @property
    def concurrent_reads(self) -> int:
        """Reads one loader process runs at once: its requests in flight, and for local files
        no more than the reader's read-ahead threads."""
        if self.local:
            return min(self.requests_in_flight, LOCAL_READ_THREADS)
        return self.requests_in_flight


# Defaults when there is no trial. S3: ~30 ms to first byte and ~90 MB/s per connection for one
# GET, as many requests in flight per process as the native reader keeps by default (its
# datasets pipeline read_many), 10 Gbit/s NIC.
S3_DEFAULTS = StorageParams(
    "s3", 0.030, 90.0, requests_in_flight=READER_INFLIGHT, aggregate_mb_s=1250.0
)
# Local files are read by the native reader, which reads up to LOCAL_READ_THREADS of them ahead
# per process (`native_loader.local`): `concurrent_reads`, whatever RD-1 sets for S3.
# Local NVMe instance storage [IO]: sub-millisecond access, GB/s per device.
LOCAL_NVME_DEFAULTS = StorageParams(
    "local-nvme", 0.0002, 1000.0, READER_INFLIGHT, aggregate_mb_s=2000.0, local=True
)
# EBS-backed / SATA SSD: EBS-backed instances cap at ~250 MB/s [SRC]; EBS's own figures: io2
# Block Express averages under 500 us for a 16 KiB read, gp2/gp3 more (AWS, "Amazon EBS
# optimization"), so 0.5 ms to a file's first byte.
LOCAL_SSD_DEFAULTS = StorageParams(
    "local-ssd", 0.0005, 250.0, READER_INFLIGHT, aggregate_mb_s=250.0, local=True
)
HDD_DEFAULTS = StorageParams(
    "local-hdd", 0.008, 150.0, READER_INFLIGHT, aggregate_mb_s=150.0, local=True
)
# EFS: a few ms per open/read, bursting ~150 MB/s baseline per TB stored [SRC].
EFS_DEFAULTS = StorageParams("efs", 0.005, 100.0, 1, aggregate_mb_s=None)
# FSx for Lustre / distributed cache: low latency, hundreds of MB/s per client [SRC][ORC].
SHARED_FS_DEFAULTS = StorageParams("shared-fs", 0.001, 500.0, 1, aggregate_mb_s=1250.0)

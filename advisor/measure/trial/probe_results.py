"""What the trial's probes measured beside the training loop, as plain data (no torch): the
storage probe's first byte and concurrency curve, the sample copy to local disk, the transform's
CPU cost, the hand-over of its samples from a worker, and the host-to-device copy.
`TrialResult` (`results.py`) holds them."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core.storage import StorageParams

SATURATION_GAIN = 1.10  # a step that adds less than 10% counts as saturated


def saturated(rates: list[float]) -> bool:
    """True when the last two steps each failed to beat the best before them by SATURATION_GAIN."""
    if len(rates) < 3:
        return False
    return all(rates[i] < max(rates[:i]) * SATURATION_GAIN for i in (-2, -1))


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

    @property
    def saturated(self) -> bool:
        """True when more requests in flight stopped adding bandwidth (`saturated`, below)."""
        return saturated([mb for _, mb, _ in self.concurrency_curve])

    @property
    def aggregate_mb_s(self) -> float | None:
        """The storage's measured ceiling: the curve's best where it saturated. A curve that
        still rose at its last level (the probe's budget or its levels ran out) is a lower
        bound on what more requests and processes read, not a ceiling: None."""
        return self.best_mb_s if self.saturated else None

    def params(self, requests_in_flight: int, *, local: bool = False) -> StorageParams:
        """The model's storage as this probe measured it, read with `requests_in_flight` per
        process. For local files (`local`) no aggregate ceiling: the probe's one process reads
        no more at once than its read-ahead threads, so its curve flattens there however many
        processes the device or the page cache would serve."""
        return StorageParams(
            name="measured-local" if local else "measured",
            first_byte_s=min(max(self.first_byte_p50_s, 0.0), 60.0),
            per_connection_mb_s=max(self.per_connection_mb_s, 1e-3),
            requests_in_flight=max(requests_in_flight, 1),
            aggregate_mb_s=None if local else self.aggregate_mb_s,
            measured=True,
            local=local,
        )


@dataclass(frozen=True)
class SampleCopy:
    """The trial's copy of a sample from where the data is to local disk (a copy-local's
    first step, measured): `bytes` in `objects` objects landed in `seconds`, the reads and the
    writes together."""

    objects: int
    bytes: int
    seconds: float

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class DecodeCost:
    """CPU time per sample of the decode/transform step, measured in-process on sampled data."""

    transform: str  # "module:callable" or the default decoder's name
    samples: int
    cpu_s_per_sample: float
    bytes_per_sample: float  # the stored sample's bytes (what the transform reads)
    # CPU seconds per sample of the whole loop that reads and transforms, in one thread (the
    # dataset's Python work per sample included): what one loader process spends per sample.
    # None: not measured (fewer than two samples).
    loop_cpu_s_per_sample: float | None = None
    # bytes of what the transform returns per sample (its tensors: a decoded image's pixels x
    # channels), what a batch holds in memory and crosses to the GPU; None: not measured
    output_bytes_per_sample: float | None = None
    # wall seconds from a fresh iterator over the listed objects to its first sample (the
    # reader's start and its first reads, all begun at once): what every epoch waits before its
    # first sample, which a set of few objects a process repeats often. None: not measured.
    start_s: float | None = None

    @property
    def overhead_s(self) -> float | None:
        """The loop's CPU per sample beyond the transform's (None: not measured)."""
        if self.loop_cpu_s_per_sample is None:
            return None
        return max(self.loop_cpu_s_per_sample - self.cpu_s_per_sample, 0.0)


@dataclass(frozen=True)
class HandoverCost:
    """What the set's samples, as the transform returns them, cost per sample to cross from a
    DataLoader worker to the training process (`probes.measure_handover`): the worker copies
    every byte of its batch into fresh shared memory (and pickles and queues it), the training
    thread maps the batch and, once done with it, releases it. The 0-workers loop pays neither:
    its samples never leave the process. CPU seconds per sample, over `samples` samples of
    `bytes_per_sample` bytes handed over in batches of `batch_size`."""

    samples: int
    batch_size: int
    bytes_per_sample: float
    worker_s_per_sample: float  # the worker's, all its threads (the queue's feeder included)
    main_s_per_sample: float  # the training thread's: taking the batch and releasing it


@dataclass(frozen=True)
class HostToDevice:
    """Host-to-device copy bandwidth (GB/s) of a batch-sized tensor, pinned vs pageable."""

    batch_bytes: int
    pinned_gb_s: float
    pageable_gb_s: float

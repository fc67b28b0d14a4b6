"""Live loader trial: storage probe, per-sample CPU cost, DataLoader sweep, host-to-device copy."""

from __future__ import annotations

import dataclasses
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from advisor.bounds import TrialBudget, range_of
from advisor.location import DatasetLocation
from advisor.model import (
    StorageParams,
    inflight_bytes,
    predict,
    process_objects_per_s,
    requests_in_flight,
)
from advisor.probes import (
    DecodeCost,
    HostToDevice,
    StorageProbe,
    host_to_device,
    measure_decode,
    probe_storage,
)
from advisor.profile import DatasetProfile
from advisor.sweep import (
    MIN_SLICE_SECONDS,
    CountRate,
    LoaderPoint,
    candidate_counts,
    measure_counts,
    summarise,
)
from advisor.workload import Workload
from native_loader import Credentials, ObjectInfo, ReaderConfig, S3IterableDataset, S3Reader
from native_loader.decoders import default_decoder, load_transform
from native_loader.uri import is_metadata

if TYPE_CHECKING:
    from advisor.hardware import HardwareProfile


@dataclass(frozen=True)
class TrialResult:
    """Everything the trial measured; a part is None when the budget ran out or it was cancelled."""

    uri: str
    seconds_budget: float
    seconds_used: float
    storage: StorageProbe | None = None
    decode: DecodeCost | None = None
    sweep: tuple[LoaderPoint, ...] = ()  # every slice of the training-loop measurement
    counts: tuple[CountRate, ...] = ()  # per num_workers: median and spread over its slices
    host_to_device: HostToDevice | None = None
    cancelled: bool = False
    notes: tuple[str, ...] = field(default=())
    requests_in_flight: int | None = None  # per process, as the decode and the sweep read
    inflight_bytes: int | None = None  # the byte budget per process the sweep read with

    def best_count(self) -> CountRate | None:
        """The count with the highest median as training saw it (not the luckiest slice)."""
        return max(self.counts, key=lambda c: c.median, default=None)

    def main_thread_s(self, num_workers: int) -> float | None:
        """The training thread's CPU seconds per sample that the sweep measured over its steady
        windows (median): with 0 workers all of the loading; with workers, taking their batches
        (unpickling what they send). None: no steady slice of that kind."""
        return self._median_cost(num_workers, "main_cpu_s_per_sample")

    def machine_s(self, num_workers: int) -> float | None:
        """The busy CPU seconds per sample of the cores this process may use, as the sweep
        measured them over its steady windows with this kind of count (0 workers, or workers):
        the loading with everything it costs beside the training thread (the readers' threads,
        the network stack, a storage server on the same machine, the workers' hand-over). Slices
        with a spinning step are left out (the spin is no loading). None: not measured."""
        return self._median_cost(num_workers, "machine_cpu_s_per_sample")

    def _median_cost(self, num_workers: int, name: str) -> float | None:
        values = [
            value
            for p in self.sweep
            if (value := getattr(p, name)) is not None and (p.num_workers > 0) == (num_workers > 0)
        ]
        return statistics.median(values) if values else None


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


# --- running a trial ---------------------------------------------------------------------------

SAMPLE_KEYS = 4000  # keys listed to draw trial objects from
LIST_SECONDS = 5.0
# The sweep also takes what the storage probe and the decode timing left over.
BUDGET_SHARES = {"storage": 0.2, "decode": 0.1, "sweep": 0.65, "h2d": 0.05}
SHUTDOWN_SHARE = 0.03  # of the budget: the sweep's loaders shutting their workers down
SLICES_PER_MODE = 2  # slices per count and step mode: a median and a spread from each
MAX_SECONDS = range_of(TrialBudget, "seconds").high


def _lower_bound_note(workers: int, samples_per_s: float, seconds: float) -> str:
    longer = min(MAX_SECONDS, max(30.0, 2 * seconds))
    return (
        f"num_workers={workers} reached no steady state within its share of the {seconds:g} s "
        f"trial: its {samples_per_s:,.1f} samples/s include start-up (or batches that waited "
        f"while it sat idle) and are only a lower bound. A longer trial (e.g. {longer:g} s) "
        "measures it."
    )


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
    # Training samples in one item the dataset yields: 1 for single-sample objects and tar
    # members; the records of a line-oriented object (text, JSONL) decoded as one item.
    samples_per_item: float = 1.0

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

    def dataset(
        self, transform: Callable[[Any], Any] | None = None, min_objects: int = 0
    ) -> Iterable[Any]:
        """Tar shards iterate as WebDataset samples; everything else one object per sample.

        With `min_objects`, the sample is cycled up to that length, so that a time-bounded
        measurement of a set with few (large) objects is not cut short by its end.
        """
        # Listed objects (with their sizes), as the datasets read a prefix: a read of unknown
        # size reserves a whole part of the byte budget until it answers, which would cap
        # small objects at max_inflight_bytes / part_size requests in flight.
        objects = list(self.objects)
        if self.fmt == "tar":  # a shard folder's index and bookkeeping are not shards
            objects = [o for o in objects if o.uri.endswith(".tar")] or objects
        if len(objects) < min_objects:
            objects = objects * -(-min_objects // len(objects))
        return S3IterableDataset(
            objects,
            config=self.config,
            credentials=self.credentials,
            transform=transform,
            tar_samples=self.fmt == "tar",
        )


def run_trial(
    location: DatasetLocation,
    profile: DatasetProfile,
    hardware: HardwareProfile,
    workload: Workload,
    *,
    credentials: Credentials | None = None,
    seconds: float = 30.0,
    progress: TrialProgress | None = None,
    cancel: threading.Event | None = None,
) -> TrialResult:
    """Measure storage, per-sample CPU cost and a DataLoader sweep within `seconds`.

    Returns what was measured before the budget ran out or `cancel` was set (`cancelled` then).
    """
    TrialBudget(seconds)  # raises ValueError naming the range
    clock = TrialClock(seconds, cancel, progress)
    fmt = profile.dominant_format
    transform_name = workload.transform or f"default decoder for {fmt}"
    transform = load_transform(workload.transform) if workload.transform else default_decoder(fmt)
    storage = decode = None
    inflight: int | None = None
    budget: int | None = None
    sweep: tuple[LoaderPoint, ...] = ()
    counts: tuple[CountRate, ...] = ()
    h2d = None
    notes: list[str] = []
    cancelled = False
    try:
        clock.report("storage", "listing objects for the trial")
        data = TrialData.sample(location, fmt, transform, credentials)
        data = dataclasses.replace(data, samples_per_item=_samples_per_item(profile, fmt))
        storage = probe_storage(data, clock, seconds * BUDGET_SHARES["storage"])
        clock.check()
        decode = measure_decode(data, transform_name, clock, seconds * BUDGET_SHARES["decode"])
        inflight = _inflight_for(storage, data, decode)
        budget = _budget_for(data, hardware, workload)
        data = data.with_inflight(inflight, budget)
        clock.report(
            "sweep",
            f"the sweep reads with {inflight} requests and {budget >> 20} MiB in flight "
            "per process",
        )
        sweep, counts = _sweep(data, hardware, workload, clock, storage, decode)
        notes += [
            _lower_bound_note(c.num_workers, c.median, seconds) for c in counts if c.lower_bound
        ]
        h2d = host_to_device(workload, decode, clock)
        if h2d is None:
            notes.append("no CUDA device: host-to-device copy and pin_memory not measured")
    except TrialCancelled:
        cancelled = True
        notes.append(f"cancelled after {clock.used():.1f} s")
    clock.report("done", "trial cancelled" if cancelled else "trial done")
    return TrialResult(
        uri=location.uri,
        seconds_budget=seconds,
        seconds_used=clock.used(),
        storage=storage,
        decode=decode,
        sweep=sweep,
        counts=counts,
        host_to_device=h2d,
        cancelled=cancelled,
        notes=tuple(notes),
        requests_in_flight=inflight,
        inflight_bytes=budget,
    )


def _samples_per_item(profile: DatasetProfile, fmt: str) -> float:
    """Samples in one item the trial's dataset yields (`TrialData.samples_per_item`): tar shards
    yield their members one by one; other objects are one item each, holding the records the
    profile counted in them (lines of a text shard)."""
    if fmt == "tar":
        return 1.0
    counted = next((f.samples_per_object for f in profile.formats if f.name == fmt), None)
    return max(1.0, counted or 1.0)


def _inflight_for(probe: StorageProbe, data: TrialData, decode: DecodeCost) -> int:
    """Requests in flight per process for the sweep: enough for the most a process can deliver
    (its transform's measured CPU cost included) at the measured latency (Little's law,
    `advisor.model.requests_in_flight`)."""
    object_bytes = data.mean_object_bytes
    samples_per_object = max(1.0, object_bytes / max(decode.bytes_per_sample, 1.0))
    return requests_in_flight(
        probe.first_byte_p50_s,
        object_bytes,
        max(probe.per_connection_mb_s, 1e-3),
        process_objects_per_s(object_bytes, decode.cpu_s_per_sample * samples_per_object),
    )


def _budget_for(data: TrialData, hardware: HardwareProfile, workload: Workload) -> int:
    """The byte budget per process for the sweep (`advisor.model.inflight_bytes`), for the
    sampled objects' mean size."""
    return inflight_bytes(
        data.mean_object_bytes,
        hardware.ram_available_bytes,
        hardware.usable_cores,
        workload.gpus_per_node,
    )


def _sweep(
    data: TrialData,
    hardware: HardwareProfile,
    workload: Workload,
    clock: TrialClock,
    storage: StorageProbe,
    decode: DecodeCost,
) -> tuple[tuple[LoaderPoint, ...], tuple[CountRate, ...]]:
    """num_workers 0 and 1 up to the rank's cores, measured as training sees them
    (`advisor.sweep.measure_counts`); when the budget holds fewer at MIN_SLICE_SECONDS a slice,
    those around the model's choice (`candidate_counts`). Pinned when a GPU is present, as the
    exported loader reads then."""
    cores = max(hardware.usable_cores // max(workload.gpus_per_node, 1), 1)
    # what the earlier phases left, less the copy test's share and the loaders' shutdown
    seconds = clock.seconds * (1 - BUDGET_SHARES["h2d"] - SHUTDOWN_SHARE) - clock.used()
    seconds = max(seconds, clock.seconds * BUDGET_SHARES["sweep"] / 4)
    modes = 2 if workload.consumer_rate else 1
    limit = int(seconds // (MIN_SLICE_SECONDS * SLICES_PER_MODE * modes))
    spo = max(1.0, data.mean_object_bytes / max(decode.bytes_per_sample, 1.0))
    params = StorageParams(
        "measured", min(max(storage.first_byte_p50_s, 0.0), 60.0),
        max(storage.per_connection_mb_s, 1e-3), data.config.max_inflight_requests,
        storage.aggregate_mb_s, measured=True,
    )  # fmt: skip
    predicted = {
        w: predict(
            w, object_bytes=data.mean_object_bytes, samples_per_object=spo,
            cpu_s_per_sample=decode.cpu_s_per_sample, usable_cores=cores, storage=params,
            consumer_rate=workload.consumer_rate, overhead_s_per_sample=decode.overhead_s,
        ).trained_samples_per_s
        for w in range(cores + 1)
    }  # fmt: skip
    counts = candidate_counts(cores, predicted, limit)
    clock.report("sweep", f"measuring num_workers {', '.join(map(str, counts))} as training sees")

    measured: list[LoaderPoint] = []

    def on_slice(point: LoaderPoint) -> None:
        measured.append(point)
        message = (
            f"num_workers={point.num_workers} ({point.step} step): "
            f"{point.samples_per_s:.0f} samples/s{'' if point.steady else ' (lower bound)'}"
        )
        clock.report("sweep", message, point)

    try:
        return measure_counts(
            data, workload.batch_size, counts, workload.consumer_rate, seconds=seconds,
            slices_per_mode=SLICES_PER_MODE, pin=torch.cuda.is_available(), check=clock.check,
            on_slice=on_slice,
        )  # fmt: skip
    except TimeoutError as exc:  # what was measured before the stall still stands
        clock.report("sweep", f"the sweep stopped: {exc}")
        return tuple(measured), summarise(measured)

"""Live loader trial: storage probe, per-sample CPU cost, DataLoader sweep, host-to-device copy."""

from __future__ import annotations

import dataclasses
import math
import os
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
from advisor.model import inflight_bytes, process_objects_per_s, requests_in_flight
from advisor.profile import DatasetProfile
from advisor.workload import Workload
from native_loader import Credentials, ObjectInfo, ReaderConfig, S3IterableDataset, S3Reader
from native_loader.decoders import collate_list, default_decoder, load_transform
from native_loader.reader import READ_AHEAD_FACTOR

if TYPE_CHECKING:
    from advisor.hardware import HardwareProfile


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
    # CPU seconds the main (training) thread spent per sample on loading, in the steady window:
    # with 0 workers all of the loader's Python work, with workers receiving the batches. It
    # cannot overlap the training step; the reader's own thread fetches on meanwhile. None:
    # not measured.
    main_cpu_s_per_sample: float | None = None
    # False: the slice ended before a steady window held enough batches, so the rate counts
    # worker start-up too and is only a lower bound (a trial too short for this count).
    steady: bool = True


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
    requests_in_flight: int | None = None  # per process, as the decode and the sweep read
    inflight_bytes: int | None = None  # the byte budget per process the sweep read with

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


# --- running a trial ---------------------------------------------------------------------------

SAMPLE_KEYS = 4000  # keys listed to draw trial objects from
LIST_SECONDS = 5.0
PROBE_OBJECTS = 12  # sequential reads for first-byte latency and per-connection bandwidth
PROBE_RANGE_BYTES = 16 * 2**20  # large objects are probed with a ranged read of this size
# Reads at least this large time the per-connection bandwidth (256 KiB take ~3 ms at 90 MB/s).
# Below, the bandwidth is bytes over whole request times, which counts the first byte twice in
# a GET's open time (first byte + bytes / bandwidth) and so asks for too many in flight.
BANDWIDTH_MIN_BYTES = 256 * 2**10
CYCLE_OBJECTS = 20_000  # the sweep cycles a small sample up to this many objects
CONCURRENCY_LEVELS = (1, 2, 4, 8, 16, 32)
SATURATION_GAIN = 1.10  # a step that adds less than 10% counts as saturated
BUDGET_SHARES = {"storage": 0.2, "decode": 0.1, "sweep": 0.65, "h2d": 0.05}
MAX_SECONDS = range_of(TrialBudget, "seconds").high


def _saturated(rates: list[float]) -> bool:
    """True when the last two steps each failed to beat the best before them by SATURATION_GAIN."""
    if len(rates) < 3:
        return False
    return all(rates[i] < max(rates[:i]) * SATURATION_GAIN for i in (-2, -1))


def _lower_bound_note(point: LoaderPoint, seconds: float) -> str:
    longer = min(MAX_SECONDS, max(30.0, 2 * seconds))
    return (
        f"num_workers={point.num_workers} reached no steady state within its share of the "
        f"{seconds:g} s trial (first batch after {point.time_to_first_batch_s:.2f} s, "
        f"{point.samples} samples in {point.seconds:.1f} s): its "
        f"{point.samples_per_s:,.1f} samples/s include start-up and are only a lower bound. "
        f"A longer trial (e.g. {longer:g} s) measures it."
    )


class TrialCancelled(Exception):
    """Raised inside the trial to unwind when the caller's cancel event is set."""


@dataclass
class _Clock:
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
            for info in reader.list(location.prefix_uri()):
                if info.size > 0:
                    objects.append(info)
                if len(objects) >= SAMPLE_KEYS or time.monotonic() > deadline:
                    break
        if not objects:
            raise FileNotFoundError(f"no non-empty objects under {location.uri!r} for a trial")
        random.Random(0).shuffle(objects)
        return cls(tuple(objects), config, fmt, transform, credentials)

    @property
    def mean_object_bytes(self) -> float:
        """The sampled objects' mean size (0 for none): what the reader settings are sized for."""
        return statistics.fmean(o.size for o in self.objects) if self.objects else 0.0

    @property
    def read_ahead_objects(self) -> int:
        """Objects one process's reader may hold fetched ahead of its consumer: `read_many`
        queues READ_AHEAD_FACTOR x its requests, within the byte budget."""
        by_requests = self.config.max_inflight_requests * READ_AHEAD_FACTOR
        by_bytes = self.config.max_inflight_bytes // max(int(self.mean_object_bytes), 1)
        return max(1, min(by_requests, by_bytes))

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
    clock = _Clock(seconds, cancel, progress)
    fmt = profile.dominant_format
    transform_name = workload.transform or f"default decoder for {fmt}"
    transform = load_transform(workload.transform) if workload.transform else default_decoder(fmt)
    storage = decode = None
    inflight: int | None = None
    budget: int | None = None
    sweep: tuple[LoaderPoint, ...] = ()
    h2d = None
    notes: list[str] = []
    cancelled = False
    try:
        clock.report("storage", "listing objects for the trial")
        data = TrialData.sample(location, fmt, transform, credentials)
        storage = _probe_storage(data, clock)
        clock.check()
        decode = _measure_decode(data, transform_name, clock)
        inflight = _inflight_for(storage, data, decode)
        budget = _budget_for(data, hardware, workload)
        data = data.with_inflight(inflight, budget)
        clock.report(
            "sweep",
            f"the sweep reads with {inflight} requests and {budget >> 20} MiB in flight "
            "per process",
        )
        sweep = _sweep(data, hardware, workload, clock)
        notes += [_lower_bound_note(p, seconds) for p in sweep if not p.steady]
        h2d = _host_to_device(workload, decode, clock)
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
        host_to_device=h2d,
        cancelled=cancelled,
        notes=tuple(notes),
        requests_in_flight=inflight,
        inflight_bytes=budget,
    )


def _probe_storage(data: TrialData, clock: _Clock) -> StorageProbe:
    share = clock.seconds * BUDGET_SHARES["storage"]
    budget_end = clock.used() + share
    sequential_end = clock.used() + share / 2  # then the concurrency curve
    first_bytes: list[float] = []
    transfer_bytes = 0
    transfer_seconds = 0.0
    total_bytes = 0
    sequential_bytes = 0
    whole_seconds = 0.0
    with data.reader() as reader:
        for info in data.objects[:PROBE_OBJECTS]:
            clock.check()
            result = reader.read_range(info.uri, 0, min(info.size, PROBE_RANGE_BYTES))
            first_bytes.append(result.first_byte_s)
            total_bytes += len(result)
            sequential_bytes += len(result)
            whole_seconds += result.elapsed_s
            if len(result) >= BANDWIDTH_MIN_BYTES:  # a small body's transfer is too short to time
                transfer_bytes += len(result)
                transfer_seconds += max(result.elapsed_s - result.first_byte_s, 1e-6)
            if clock.used() > sequential_end and len(first_bytes) >= 3:
                break
    clock.report("storage", f"first byte p50 {statistics.median(first_bytes) * 1000:.1f} ms")
    curve: list[tuple[int, float, float]] = []
    objects_read = len(first_bytes)
    for level in CONCURRENCY_LEVELS:
        remaining = budget_end - clock.used()
        if remaining <= 0:
            break
        slice_s = remaining / max(1, len(CONCURRENCY_LEVELS) - len(curve))
        mb_s, objects_s, read, count = _read_for(data, level, slice_s, clock)
        total_bytes += read
        objects_read += count
        curve.append((level, mb_s, objects_s))
        clock.report("storage", f"{level} in flight: {mb_s:.0f} MB/s, {objects_s:.0f} objects/s")
        if _saturated([mb for _, mb, _ in curve]):
            break
    ordered = sorted(first_bytes)
    return StorageProbe(
        objects_read=objects_read,
        bytes_read=total_bytes,
        first_byte_p50_s=statistics.median(ordered),
        first_byte_p95_s=ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        # Small objects only: bytes over whole request times, a lower bound on the bandwidth.
        per_connection_mb_s=(
            transfer_bytes / transfer_seconds / 1e6
            if transfer_bytes
            else sequential_bytes / max(whole_seconds, 1e-6) / 1e6
        ),
        concurrency_curve=tuple(curve),
    )


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


def _read_for(
    data: TrialData, level: int, seconds: float, clock: _Clock
) -> tuple[float, float, int, int]:
    """(MB/s, objects/s, bytes, objects) of read_many with `level` requests in flight."""
    count = 0
    read = 0
    started = time.monotonic()
    objects = data.objects
    with data.reader(max_inflight_requests=level) as reader:
        cycle = (objects[i % len(objects)] for i in range(len(objects) * 4))
        for result in reader.read_many(cycle):
            count += 1
            read += len(result)
            if time.monotonic() - started >= seconds:
                break
            clock.check()
    elapsed = max(time.monotonic() - started, 1e-6)
    return read / elapsed / 1e6, count / elapsed, read, count


def _measure_decode(data: TrialData, transform_name: str, clock: _Clock) -> DecodeCost:
    """CPU seconds per sample of the transform, in this process, on real samples of the set."""
    budget = clock.seconds * BUDGET_SHARES["decode"]
    sample_data = dataclasses.replace(data, objects=data.objects[:64])
    cpu = 0.0
    samples = 0
    sample_bytes = 0
    started = time.monotonic()
    for sample in sample_data.dataset():
        clock.check()
        sample_bytes += _sample_bytes(sample)
        before = time.thread_time()
        data.transform(sample)
        cpu += time.thread_time() - before
        samples += 1
        if time.monotonic() - started > budget and samples >= 3:
            break
    if samples == 0:
        raise FileNotFoundError("no samples could be read for the decode measurement")
    clock.report("decode", f"{transform_name}: {cpu / samples * 1000:.2f} ms CPU per sample")
    return DecodeCost(transform_name, samples, cpu / samples, sample_bytes / samples)


def _sample_bytes(sample: Any) -> int:
    if isinstance(sample, dict):
        return sum(len(memoryview(v)) for k, v in sample.items() if not k.startswith("__"))
    return len(memoryview(sample))


def worker_counts(cores: int) -> list[int]:
    """num_workers to try: 0, 1, then powers of two up to the cores, and the cores themselves."""
    counts = [0, 1]
    n = 2
    while n <= max(cores, 1):
        counts.append(n)
        n *= 2
    if counts[-1] != cores and cores > 1:
        counts.append(cores)
    return sorted(set(counts))


def _sweep(
    data: TrialData, hardware: HardwareProfile, workload: Workload, clock: _Clock
) -> tuple[LoaderPoint, ...]:
    """DataLoader throughput over num_workers (and pin_memory with a GPU); stops at saturation."""
    pin_options = (False, True) if torch.cuda.is_available() else (False,)
    counts = worker_counts(hardware.usable_cores)
    budget_end = clock.used() + clock.seconds * BUDGET_SHARES["sweep"]
    points: list[LoaderPoint] = []
    for pin in pin_options:
        rates: list[float] = []
        for index, workers in enumerate(counts):
            remaining = budget_end - clock.used()
            left = (len(counts) - index) + (len(counts) if pin != pin_options[-1] else 0)
            if remaining <= 0.2:
                break
            point = measure_loader(
                data, workload.batch_size, workers, pin, remaining / left, clock.check,
                max_seconds=remaining,
            )  # fmt: skip
            points.append(point)
            message = f"num_workers={workers} pin_memory={pin}: {point.samples_per_s:.0f} samples/s"
            clock.report("sweep", message, point)
            rates.append(point.samples_per_s)
            if _saturated(rates):
                break  # throughput clearly saturated on this branch
    return tuple(points)


@dataclass
class SteadyWindow:
    """The steady-state window of one loader measurement, kept on batch arrival times.

    It opens on the first batch to arrive a third of what is left of the slice (`seconds`) past
    the first batch, at least a sixth of the slice, and not before the `warm_batches` that could
    be finished and waiting then (the DataLoader's prefetch), and the `backlog_batches` the
    readers could hold fetched ahead, have arrived. Those were made while the first batch was on
    its way; they arrive back to back, and would count as if made in the window. The readers'
    backlog is the larger (8 workers reading 1 MB objects hold ~268 each in 256 MiB budgets): a
    window opened before it drained read about twice the long-run rate in short slices.

    It counts whole rounds of `round_batches` (the loader's processes): the DataLoader hands
    batches out in order, one from each worker in turn, so a window from one batch to a later
    batch of the same worker holds as many batches of every worker. Workers started together
    deliver in bursts (8 workers, 8 ms of CPU per sample: several batches a few ms apart, then
    up to 0.6 s of nothing), and a window with one end on an arrival and the other at a time counts
    a burst more or less by where it falls; whole rounds count every burst whole, which about
    halves the scatter around the long-run rate.

    It closes on the first round's end at or after the end of the slice, or a third of the
    slice after it opens if that is later. Both ends follow a time, not a batch count: batches
    also come in bursts when a stalled request holds up everything behind it, and a window that
    closed on the batch that met its count could lie within a burst and leave out the gaps
    around it (such a window can read several times the long-run rate). A window that holds
    fewer than twice the waiting batches (at least 3), or fewer than `min_samples`, is extended a
    third of the slice at a time, up to `hard_stop` seconds after the start.
    """

    started: float  # time.monotonic() when the loader was started
    seconds: float
    warm_batches: int
    min_samples: int
    hard_stop: float
    backlog_batches: int = 0
    round_batches: int = 1
    planned_open: float = math.inf  # set by the first batch
    opens: float | None = None  # the arrival time of the batch it opens on (not counted)
    opening_index: int = 0
    closes: float = math.inf
    closed: bool = False  # a round ended at or after `closes`
    batches: int = 0  # counted: whole rounds after the opening batch
    samples: int = 0
    last_counted_at: float = 0.0  # the last counted round's end
    round_samples: int = 0  # arrived in the round under way, not counted yet

    @property
    def enough(self) -> bool:
        return self.batches >= max(3, 2 * self.warm_batches) and self.samples >= self.min_samples

    def arrival(self, index: int, now: float, samples: int) -> bool:
        """Batch `index` of `samples` arrived at `now`; True if it ended a counted round."""
        if self.opens is None:
            if index == 0:
                left = max(self.seconds - (now - self.started), self.seconds / 2)
                self.planned_open = now + left / 3
            waited = index >= self.warm_batches + self.backlog_batches - 1
            if waited and now >= self.planned_open:
                self.opens, self.opening_index = now, index
                self.closes = max(self.started + self.seconds, now + self.seconds / 3)
            return False
        if self.closed:
            return False
        self.round_samples += samples
        if (index - self.opening_index) % self.round_batches:
            return False
        self.batches += self.round_batches
        self.samples += self.round_samples
        self.round_samples = 0
        self.last_counted_at = now
        step, limit = self.seconds / 3, self.started + self.hard_stop
        while now >= self.closes and not self.enough and self.closes + step <= limit:
            self.closes += step
        self.closed = now >= self.closes
        return True

    def rate(self) -> float | None:
        """Samples per second within the window; None if it never held enough."""
        if self.opens is None or not self.enough or self.last_counted_at <= self.opens:
            return None
        return self.samples / (self.last_counted_at - self.opens)


def measure_loader(
    data: TrialData,
    batch_size: int,
    workers: int,
    pin: bool,
    seconds: float,
    check: Callable[[], None] | None = None,
    max_seconds: float | None = None,
    min_samples: int = 0,
) -> LoaderPoint:
    """Run a real DataLoader over `data` for about `seconds` and measure it.

    The rate is the steady state, over the window that `SteadyWindow` describes. A slice too
    short for it is extended up to `max_seconds` (default three times `seconds`); failing that,
    the rate includes start-up (a lower bound). The objects are cycled so that the run ends on
    time, not when a small sample runs out. `check` is called after every batch (it may raise to
    stop early). With `min_samples`, the window must also hold that many samples (large objects
    arrive a few per second: a handful would make the rate a coin toss).
    """
    prefetch = 2 if workers > 0 else None
    loader: torch.utils.data.DataLoader[Any] = torch.utils.data.DataLoader(
        data.dataset(data.transform, min_objects=CYCLE_OBJECTS),  # type: ignore[arg-type]
        batch_size=batch_size,
        num_workers=workers,
        pin_memory=pin,
        prefetch_factor=prefetch,
        collate_fn=collate_list,
        multiprocessing_context="fork" if workers > 0 else None,
    )
    hard_stop = max(seconds, max_seconds if max_seconds is not None else 3 * seconds)
    existing = child_pids()  # e.g. a local S3 server: not a DataLoader worker
    started = time.monotonic()
    # every loader process's reader may hold read_ahead_objects fetched (one sample each, or
    # more for shards: then this skips too little)
    backlog = math.ceil(max(workers, 1) * data.read_ahead_objects / batch_size)
    window = SteadyWindow(
        started, seconds, workers * (prefetch or 0), min_samples, hard_stop, backlog,
        round_batches=max(workers, 1),
    )  # fmt: skip
    first_batch_s = 0.0
    samples = 0
    sample_bytes = 0
    peak_rss = 0.0
    # The main thread's CPU time at arrivals: a batch's loading work happens before it arrives,
    # so the window's share runs from its opening batch's arrival to its last round's end.
    cpu_window_start = cpu_window_end = time.thread_time()
    iterator = iter(loader)
    try:
        for batch_index, batch in enumerate(iterator):
            now = time.monotonic()
            cpu_now = time.thread_time()
            if batch_index == 0:
                first_batch_s = now - started
            waiting = window.opens is None
            if window.arrival(batch_index, now, len(batch)):
                cpu_window_end = cpu_now
            elif waiting and window.opens is not None:
                cpu_window_start = cpu_now
            samples += len(batch)
            sample_bytes += sum(_tensor_bytes(s) for s in batch)
            if batch_index % 8 == 0:
                peak_rss = max(peak_rss, _largest_rss_mb(child_pids() - existing))
            if check is not None:
                check()
            if window.closed or now - started >= hard_stop:
                break
    finally:
        del iterator  # shuts the workers down
    elapsed = max(time.monotonic() - started, 1e-6)
    steady_rate = window.rate()
    rate = steady_rate if steady_rate is not None else samples / elapsed
    main_cpu = (
        (cpu_window_end - cpu_window_start) / window.samples if steady_rate is not None else None
    )
    bytes_per_sample = sample_bytes / samples if samples else 0.0
    return LoaderPoint(
        num_workers=workers,
        pin_memory=pin,
        prefetch_factor=prefetch,
        samples=samples,
        seconds=elapsed,
        samples_per_s=rate,
        mb_per_s=rate * bytes_per_sample / 1e6,
        time_to_first_batch_s=first_batch_s,
        peak_worker_rss_mb=peak_rss,
        main_cpu_s_per_sample=main_cpu,
        steady=steady_rate is not None,
    )


def _tensor_bytes(sample: Any) -> int:
    if isinstance(sample, torch.Tensor):
        return sample.numel() * sample.element_size()
    if isinstance(sample, dict):
        return sum(_tensor_bytes(v) for v in sample.values())
    return 0


def child_pids() -> set[int]:
    """PIDs of this process's children (all threads' children, as DataLoader forks from one)."""
    pids: set[int] = set()
    pid = os.getpid()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids.update(int(child) for child in f.read().split())
        except OSError:
            continue
    return pids


def _largest_rss_mb(pids: set[int]) -> float:
    """Largest resident set (MB) among `pids`; processes that are gone count as 0."""
    largest = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        largest = max(largest, int(line.split()[1]))
        except OSError:
            continue
    return largest / 1024


def _host_to_device(
    workload: Workload, decode: DecodeCost | None, clock: _Clock
) -> HostToDevice | None:
    """Pinned vs pageable copy bandwidth of one batch, when a CUDA device is present."""
    if not torch.cuda.is_available():
        return None
    clock.report("h2d", "measuring host-to-device copies")
    per_sample = int(decode.bytes_per_sample) if decode else 150_000
    batch_bytes = max(1, min(per_sample * workload.batch_size, 512 * 2**20))
    results = {}
    for pinned in (False, True):
        host = torch.empty(batch_bytes, dtype=torch.uint8, pin_memory=pinned)
        device = torch.empty(batch_bytes, dtype=torch.uint8, device="cuda")
        device.copy_(host, non_blocking=pinned)
        torch.cuda.synchronize()
        repeats = 10
        started = time.perf_counter()
        for _ in range(repeats):
            device.copy_(host, non_blocking=pinned)
        torch.cuda.synchronize()
        results[pinned] = batch_bytes * repeats / (time.perf_counter() - started) / 1e9
    return HostToDevice(batch_bytes, pinned_gb_s=results[True], pageable_gb_s=results[False])

"""The trial's measurements around the sweep: the storage probe, the per-sample CPU cost of the
transform, its samples' hand-over from a worker, and the host-to-device copy. `run_trial`
(`advisor.measure.trial.run`) runs them within its budget."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import torch

from advisor.core.units import counted, mb_per_s
from advisor.core.workload import Workload
from advisor.measure.hardware.gpu_decode import (
    GpuDecode,
    gpu_decode_unavailable,
    measure_gpu_decode,
)
from advisor.measure.hardware.host import child_pids
from advisor.measure.hardware.processes import TreeMeter
from advisor.measure.trial.data import TrialClock, TrialData
from advisor.measure.trial.probe_results import (
    DecodeCost,
    HandoverCost,
    HostToDevice,
    StorageProbe,
    saturated,
)
from advisor.measure.trial.steady import tensor_bytes
from native_loader import ObjectInfo, S3IterableDataset
from native_loader.loader import LoaderSettings, make_dataloader
from native_loader.sample_errors import SampleGuard, SamplePolicy, check_name, sample_name

PROBE_OBJECTS = 12  # sequential reads for first-byte latency and per-connection bandwidth
PROBE_RANGE_BYTES = 16 * 2**20  # large objects are probed with a ranged read of this size
# Reads at least this large time the per-connection bandwidth (256 KiB take ~3 ms at 90 MB/s).
# Below, the bandwidth is bytes over whole request times, which counts the first byte twice in
# a GET's open time (first byte + bytes / bandwidth) and so asks for too many in flight.
BANDWIDTH_MIN_BYTES = 256 * 2**10
CONCURRENCY_LEVELS = (1, 2, 4, 8, 16, 32)
# The hand-over probe's batches: the sweep's batch size, but no more than this many bytes (its
# cost is per byte there, and a batch of 32 8 MB samples takes a loaded 2-core machine a second).
# It times batches after the first (the worker's start) until its budget is spent, one at least:
# /proc counts CPU in hundredths of a second, which small samples need many batches to fill.
HANDOVER_BATCH_BYTES = 64 * 2**20
START_TIMINGS = 3  # fresh iterators the decode probe times to their first sample
HANDOVER_TIMEOUT_S = 60.0  # a worker batch slower than this: no measurement


class WatchedTransform:
    """The trial's transform, noting the call in progress in this process (sample, start), so
    that the trial's watch can name a transform that does not return (`advisor.measure.trial.
    watch`). `__wrapped__` lets errors name the transform it wraps."""

    def __init__(self, transform: Callable[[Any], Any]) -> None:
        self.__wrapped__ = transform
        functools.update_wrapper(self, transform)
        self.running: tuple[str, float] | None = None

    def __call__(self, item: Any) -> Any:
        self.running = (sample_name(item), time.monotonic())
        try:
            return self.__wrapped__(item)
        finally:
            self.running = None


def check_names(objects: Iterable[ObjectInfo]) -> None:
    """Refuse a sampled file whose name is not UTF-8: no reader can open it by that name."""
    for info in objects:
        check_name(info.uri)


def probe_storage(
    data: TrialData,
    clock: TrialClock,
    share: float,
    levels: tuple[int, ...] = CONCURRENCY_LEVELS,
    phase: str = "storage",
) -> StorageProbe:
    """First byte and per-connection bandwidth from sequential reads, then aggregate MB/s as
    requests in flight rise through `levels`, within `share` seconds, reported as `phase`.

    A local file is read whole in one call, which has no first byte of its own: its first byte
    is the time of a one-byte read of the same file (the open and the call), the rest of the
    read its transfer."""
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
            first_byte = result.first_byte_s
            if first_byte >= result.elapsed_s and len(result) > 1:  # read whole: a local file
                first_byte = min(reader.read_range(info.uri, 0, 1).elapsed_s, first_byte)
            first_bytes.append(first_byte)
            total_bytes += len(result)
            sequential_bytes += len(result)
            whole_seconds += result.elapsed_s
            if len(result) >= BANDWIDTH_MIN_BYTES:  # a small body's transfer is too short to time
                transfer_bytes += len(result)
                transfer_seconds += max(result.elapsed_s - first_byte, 1e-6)
            if clock.used() > sequential_end and len(first_bytes) >= 3:
                break
    clock.report(phase, f"first byte p50 {statistics.median(first_bytes) * 1000:.3g} ms")
    curve: list[tuple[int, float, float]] = []
    objects_read = len(first_bytes)
    for level in levels:
        remaining = budget_end - clock.used()
        if remaining <= 0:
            break
        slice_s = remaining / max(1, len(levels) - len(curve))
        mb_s, objects_s, read, count = _read_for(data, level, slice_s, clock)
        total_bytes += read
        objects_read += count
        curve.append((level, mb_s, objects_s))
        clock.report(
            phase,
            f"{counted(level, 'read')} at once: {mb_per_s(mb_s)}, {objects_s:,.0f} objects/s",
        )
        if saturated([mb for _, mb, _ in curve]):
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


def _read_for(
    data: TrialData, level: int, seconds: float, clock: TrialClock
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


def measure_decode(
    data: TrialData, transform_name: str, clock: TrialClock, budget: float
) -> DecodeCost:
    """CPU seconds per sample of the transform, in this process, on real samples of the set,
    for about `budget` seconds."""
    sample_data = dataclasses.replace(data, objects=data.objects[:64])
    cpu = 0.0
    samples = 0
    sample_bytes = 0
    output_bytes = 0
    started = time.monotonic()
    first_arrival = last_arrival = 0.0  # this thread's CPU time as samples arrive
    guard = SampleGuard(SamplePolicy())  # a failure is raised naming its object
    dataset = cast(S3IterableDataset, sample_data.dataset())
    start_s = None
    begun = time.perf_counter()
    for name, sample in dataset.named_items(guard):
        clock.check()
        last_arrival = time.thread_time()
        if samples == 0:
            first_arrival = last_arrival  # the first includes the dataset's set-up
            start_s = time.perf_counter() - begun
        sample_bytes += _sample_bytes(sample)
        before = time.thread_time()
        _, output = guard.apply(data.transform, name, sample)
        cpu += time.thread_time() - before
        output_bytes += tensor_bytes(output)
        samples += 1
        if time.monotonic() - started > budget and samples >= 3:
            break
    if samples == 0:
        raise FileNotFoundError("no samples could be read for the decode measurement")
    if start_s is not None:
        start_s = _epoch_start_s(sample_data, start_s, clock, budget)
    per_sample_ms = cpu / samples / data.samples_per_item * 1000
    clock.report("decode", f"{transform_name}: {per_sample_ms:.3g} ms CPU per sample")
    loop = (last_arrival - first_arrival) / (samples - 1) if samples > 1 else None
    per_item = data.samples_per_item  # an item may hold many samples (a text shard's lines)
    return DecodeCost(
        transform_name,
        samples,
        cpu / samples / per_item,
        sample_bytes / samples / per_item,
        None if loop is None else loop / per_item,
        output_bytes / samples / per_item if output_bytes else None,
        start_s,
    )


def _epoch_start_s(data: TrialData, first_s: float, clock: TrialClock, budget: float) -> float:
    """The median wait for a fresh iterator's first sample over `START_TIMINGS` starts, the
    decode's `first_s` one of them: one start varies several-fold on a busy machine (the first
    reads share the cores with everything else). Starts cost a first read each: they are
    repeated only where all of them fit in a quarter of the decode's `budget` (a set of large
    objects read whole keeps its one timing rather than take the sweep's time)."""
    starts = [first_s]
    while len(starts) < START_TIMINGS and first_s * (START_TIMINGS - 1) <= budget / 4:
        clock.check()
        begun = time.perf_counter()
        items = iter(data.dataset())
        next(items, None)
        starts.append(time.perf_counter() - begun)
        close = getattr(items, "close", None)
        if close is not None:
            close()  # its reader's threads and requests end here, not at collection
    return statistics.median(starts)


class _InTurn(torch.utils.data.Dataset[Any]):
    """`samples` in turn, for as many indices as a probe asks."""

    def __init__(self, samples: Sequence[Any]) -> None:
        self.samples = samples

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> Any:
        return self.samples[index % len(self.samples)]


def handover_samples(data: TrialData, batch_items: int) -> list[Any]:
    """The first of the set's samples as the transform returns them, up to a hand-over probe's
    batch (`batch_items`, and no more than HANDOVER_BATCH_BYTES, at least one), made apart
    from the decode's timing: kept alive, they would change how its allocations reuse memory."""
    sample_data = dataclasses.replace(data, objects=data.objects[:64])
    samples: list[Any] = []
    held = 0
    for sample in sample_data.dataset(data.transform):
        samples.append(sample)
        held += tensor_bytes(sample)
        if len(samples) >= batch_items or held >= HANDOVER_BATCH_BYTES:
            break
    return samples


def measure_handover(
    samples: Sequence[Any], batch_size: int, clock: TrialClock, budget: float
) -> HandoverCost | None:
    """What `samples` (the transform's outputs, `handover_samples`) cost per sample to cross
    from a DataLoader worker to this thread, the runtime's loader handing them over
    (`collate_list`'s batches, their tensors in one shared block per batch), within about
    `budget` seconds: the worker's CPU and this thread's (taking each batch, then dropping it)
    over the batches after the first (the worker's start). None: no samples, or no worker
    could start."""
    if not samples:
        return None
    per_sample = statistics.fmean(tensor_bytes(s) for s in samples)
    batch = max(1, min(batch_size, int(HANDOVER_BATCH_BYTES // max(per_sample, 1.0))))
    clock.report("decode", f"timing the hand-over of {batch}-sample batches from a worker")
    meter = TreeMeter(leave_out=frozenset(child_pids()))  # a local server is not the worker
    meter.start()
    loader = make_dataloader(
        _InTurn(samples), LoaderSettings(batch_size=batch, num_workers=1, prefetch_factor=2),
        multiprocessing_context="fork", timeout=HANDOVER_TIMEOUT_S,
    )  # fmt: skip
    started = time.monotonic()
    batches: Any = None
    taken = 0
    try:
        batches = iter(loader)
        next(batches)  # the worker is up: its start is no hand-over
        before, thread = meter.read().without(os.getpid()), time.thread_time()
        while not taken or time.monotonic() - started < budget:
            clock.check()
            taken += len(next(batches))  # and dropped: its release is the training thread's
        thread = time.thread_time() - thread
        worker = meter.read().without(os.getpid()).cpu_since(before)
    except (OSError, RuntimeError):  # no worker here (a sandbox), or one that timed out
        return None
    finally:
        shutdown = getattr(batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
    return HandoverCost(taken, batch, per_sample, worker / taken, thread / taken)


def _sample_bytes(sample: Any) -> int:
    """Bytes of a raw sample: an object's, a tar sample's fields', or a record's text (a parsed
    JSON line or CSV row counted as its JSON text)."""
    if isinstance(sample, str):
        return len(sample.encode())
    if isinstance(sample, dict) and not any(k.startswith("__") for k in sample):
        return len(json.dumps(sample, default=str).encode())  # a parsed record
    if isinstance(sample, dict):
        return sum(len(memoryview(v)) for k, v in sample.items() if not k.startswith("__"))
    if isinstance(sample, (list, int, float, bool)) or sample is None:
        return len(json.dumps(sample, default=str).encode())  # a JSON line's value
    return len(memoryview(sample))


def probe_gpu_decode(data: TrialData, workload: Workload, clock: TrialClock) -> GpuDecode | str:
    """Batched GPU decode of up to 64 of the set's JPEGs, where a CUDA device and torchvision
    are present: what DEC-1 weighs against the CPU decode. A string says why it was not
    measured (the rule then takes the recorded figures)."""
    why = gpu_decode_unavailable()
    if why is not None:
        return why
    clock.report("decode", "measuring the JPEG decode on the GPU")
    sample_data = dataclasses.replace(data, objects=data.objects[:64])
    guard = SampleGuard(SamplePolicy())
    jpegs = [
        bytes(memoryview(sample))
        for _, sample in cast(S3IterableDataset, sample_data.dataset()).named_items(guard)
        if not isinstance(sample, (dict, str))
    ]
    if not jpegs:
        return "no whole JPEG objects to decode on the GPU"
    try:
        point = measure_gpu_decode(jpegs, workload.batch_size, rounds=2)
    except RuntimeError as exc:  # nvJPEG refused the images or the device: a note, not a failure
        return f"the GPU decode failed ({exc})"
    return GpuDecode(torch.cuda.get_device_name(0), workload.batch_size, (point,))


def host_to_device(
    workload: Workload, decode: DecodeCost | None, clock: TrialClock
) -> HostToDevice | None:
    """Pinned vs pageable copy bandwidth of one batch, when a CUDA device is present."""
    if not torch.cuda.is_available():
        return None
    clock.report("h2d", "measuring host-to-device copies")
    per_sample = (
        int(decode.output_bytes_per_sample or decode.bytes_per_sample) if decode else 150_000
    )
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

"""The trial's sweep of num_workers on one read path: the model, from what the probes measured,
predicts each count; the count search (`CountSearch`) chooses which counts the budget measures;
each count reads with the prefetch the advice would export for it; and `measure_counts`
(`sweep.py`) measures them as training sees them."""

from __future__ import annotations

import functools
import math

import torch

from advisor.core.model import HEADROOM, MeasuredCosts, predict
from advisor.core.workload import Workload
from advisor.measure.hardware import HardwareProfile
from advisor.measure.trial.data import TrialClock, TrialData
from advisor.measure.trial.deadline import overrun_s
from advisor.measure.trial.live import CYCLE_OBJECTS
from advisor.measure.trial.probe_results import DecodeCost, StorageProbe
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_PATH_WORDS,
    STEP_WORDS,
    CountRate,
    LoaderPoint,
    summarise,
)
from advisor.measure.trial.search import CountSearch, measured_ceiling, step_modes
from advisor.measure.trial.sweep import MIN_SLICE_SECONDS, measure_counts
from native_loader.loader import prefetch_for
from native_loader.shm_plan import SHM_SHARE, prefetch_within_shm

SLICES_PER_MODE = 2  # slices per count and step mode: a median and a spread from each


def sweep_counts(
    data: TrialData,
    hardware: HardwareProfile,
    workload: Workload,
    clock: TrialClock,
    storage: StorageProbe,
    decode: DecodeCost,
    read_path: str,
    seconds: float,
    *,
    local: bool = False,
    refused: dict[int, str] | None = None,
) -> tuple[tuple[LoaderPoint, ...], tuple[CountRate, ...]]:
    """num_workers 0 and 1 up to the rank's cores (no more than the objects an epoch deals: a
    worker above them reads nothing), measured as training sees them
    (`advisor.measure.trial.sweep.measure_counts`); when the budget holds fewer at
    MIN_SLICE_SECONDS a slice, those the count search chooses as it measures (`CountSearch`,
    from the model's choice). Both step models where they can disagree (`step_modes`). Pinned
    when a GPU is present, as the exported loader reads then. Each count reads with the
    prefetch the advice would export for it, lowered to what half of /dev/shm's free bytes
    hold (PF-2, SHM-1); a count whose batches /dev/shm cannot hold at all is not measured:
    `refused` gets it, with the loader's line saying why and what to change."""
    # the rank's share of the cores, a fraction under a fractional quota: every count up to the
    # whole cores it touches is measured (1.5 cores: 0, 1 and 2 workers), the model gets 1.5
    cores = hardware.usable_cores / max(workload.gpus_per_node, 1)
    slots = max(math.ceil(cores - 1e-9), 1)
    # a worker above the epoch's objects is dealt none: no count above them is worth a slice
    highest = slots if data.epoch_objects is None else max(min(slots, data.epoch_objects), 1)
    spo = max(1.0, data.mean_object_bytes / max(decode.bytes_per_sample, 1.0))
    # `storage`: the probe of what this sweep reads (the listed objects, or the local copy);
    # `local`: it reads local files
    params = storage.params(data.config.max_inflight_requests, local=local)
    stall_s = storage.first_byte_p95_s
    predictions = {
        w: predict(
            w, object_bytes=data.mean_object_bytes, samples_per_object=spo,
            cpu_s_per_sample=decode.cpu_s_per_sample, usable_cores=cores, storage=params,
            consumer_rate=workload.consumer_rate, epoch_objects=data.epoch_objects,
            costs=MeasuredCosts(overhead_s=decode.overhead_s),
        )
        for w in range(highest + 1)
    }  # fmt: skip
    predicted = {w: p.trained_samples_per_s for w, p in predictions.items()}
    modes = step_modes(workload.consumer_rate, max(predicted.values()), cores)
    limit = max(int(seconds // (MIN_SLICE_SECONDS * SLICES_PER_MODE * len(modes))), 2)
    consumer = workload.consumer_rate
    search = CountSearch(
        highest, predicted, limit, None if consumer is None else consumer * HEADROOM
    )
    # each count reads with the prefetch the advice would export for it (PF-2's formula),
    # within /dev/shm's free bytes as this machine has them (SHM-1)
    prefetch = {
        w: _within_shm(
            prefetch_for(stall_s, predictions[w].samples_per_s / w, workload.batch_size),
            w, hardware, decode, workload.batch_size,
        )
        for w in range(1, highest + 1)
    }  # fmt: skip
    ceiling = functools.partial(
        measured_ceiling, cores=cores, storage=storage if not local else None, spo=spo
    )
    counts = search.first()
    on = READ_PATH_WORDS.get(read_path, READ_PATH_WORDS[READ_LISTED])
    epochs = ""
    if data.epoch_objects is not None and data.epoch_objects < CYCLE_OBJECTS:
        unit = "shards" if data.fmt == "tar" else "objects"
        epochs = f", in epochs of {data.epoch_objects:,} {unit} as training's"
    more = "" if search.every else f", then up to {limit - len(counts)} more as the rates direct"
    steps = " and ".join(f"a {m} step" for m in modes)
    clock.report(
        "sweep",
        f"measuring num_workers {', '.join(map(str, counts))}{more} on {on} as training sees"
        f"{epochs} ({steps})",
    )

    measured: list[LoaderPoint] = []

    def on_refused(workers: int, why: str) -> None:
        if refused is not None:
            refused[workers] = why
        clock.report("sweep", f"num_workers={workers} not measured: {why}")

    def on_slice(point: LoaderPoint) -> None:
        measured.append(point)
        message = (
            f"num_workers={point.num_workers} ({STEP_WORDS.get(point.step, point.step)}): "
            f"{point.samples_per_s:.0f} samples/s{'' if point.steady else ' (lower bound)'}"
        )
        clock.report("sweep", message, point)

    try:
        return measure_counts(
            data, workload.batch_size, search, workload.consumer_rate, seconds=seconds,
            slices_per_mode=SLICES_PER_MODE, modes=modes, pin=torch.cuda.is_available(),
            check=clock.check, on_slice=on_slice, prefetch=prefetch,
            batch_timeout_s=clock.seconds + overrun_s(clock.seconds), ceiling=ceiling,
            on_refused=on_refused,
        )  # fmt: skip
    except TimeoutError as exc:  # what was measured before the stall still stands
        clock.report("sweep", f"the sweep stopped: {exc}")
        return tuple(measured), summarise(measured)


def _within_shm(
    prefetch: int, workers: int, hardware: HardwareProfile, decode: DecodeCost, batch_size: int
) -> int:
    """`prefetch` lowered to what half of /dev/shm's free bytes hold for `workers` (at least
    1: where none fits, the loader says so at its first batch)."""
    free = hardware.shm_free_bytes
    if free is None:
        return prefetch
    per_sample = decode.output_bytes_per_sample or decode.bytes_per_sample
    fits = prefetch_within_shm(prefetch, workers, per_sample * batch_size, SHM_SHARE * free)
    return max(fits, 1)

"""Live loader trial: storage probe, per-sample CPU cost, DataLoader sweep, host-to-device copy."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from advisor.core.bounds import TrialBudget, range_of
from advisor.core.location import DatasetLocation
from advisor.core.model import process_objects_per_s
from advisor.core.reader_budget import inflight_bytes, requests_in_flight
from advisor.core.storage import LOCAL_READ_THREADS
from advisor.core.workload import Workload
from advisor.measure.hardware import HardwareProfile
from advisor.measure.hardware.gpu_decode import GpuDecode
from advisor.measure.profile import DatasetProfile
from advisor.measure.trial.counts import sweep_counts
from advisor.measure.trial.data import TrialCancelled, TrialClock, TrialData, TrialProgress
from advisor.measure.trial.deadline import TrialDeadline
from advisor.measure.trial.localcopy import CopyUnavailable, copy_sample
from advisor.measure.trial.packed import pack_sample
from advisor.measure.trial.probe_results import DecodeCost, SampleCopy, StorageProbe
from advisor.measure.trial.probes import (
    CONCURRENCY_LEVELS,
    WatchedTransform,
    check_names,
    handover_samples,
    host_to_device,
    measure_decode,
    measure_handover,
    probe_gpu_decode,
    probe_storage,
)
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_LOCAL_COPY,
    READ_PACKED,
    ReadPathSweep,
    TrialResult,
    TrialSetup,
)
from native_loader import Credentials
from native_loader.decoders import default_decoder, load_transform

# The sweep also takes what the storage probe, the decode timing and the sample copy (or packing)
# with its own probe (when the training reads a local copy or packed shards; at most their
# shares) left over: at least 60% of the budget, the counts it measures being what decides.
BUDGET_SHARES = {
    "storage": 0.1, "decode": 0.06, "handover": 0.02, "copy": 0.12, "copy_probe": 0.03,
    "sweep": 0.6, "h2d": 0.03,
}  # fmt: skip
# The local copy's probe: one process reads no more local files at once than its read-ahead
# threads, so higher levels would measure the same.
LOCAL_LEVELS = tuple(level for level in CONCURRENCY_LEVELS if level <= LOCAL_READ_THREADS)
SHUTDOWN_SHARE = 0.03  # of the budget: the sweep's loaders shutting their workers down
MAX_SECONDS = range_of(TrialBudget, "seconds").high

# The read paths the trial makes from a sample of the listed objects, as progress and notes
# name them (`_make_sample`).
MADE = {READ_LOCAL_COPY: "the local copy", READ_PACKED: "the sample packed into tar shards"}


def _lower_bound_note(workers: int, samples_per_s: float, seconds: float) -> str:
    longer = min(MAX_SECONDS, max(30.0, 2 * seconds))
    return (
        f"num_workers={workers} reached no steady state within its share of the {seconds:g} s "
        f"trial: its {samples_per_s:,.1f} samples/s include start-up (or batches that waited "
        f"while it sat idle) and are only a lower bound. A longer trial (e.g. {longer:g} s) "
        "measures it."
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
    read_paths: tuple[str, ...] = (READ_LISTED,),
    scratch_dir: Path | None = None,
) -> TrialResult:
    """Measure storage, per-sample CPU cost and a DataLoader sweep within `seconds`.

    `read_paths` are what training reads, in epoch order: the listed objects (`READ_LISTED`),
    a local copy of a sample (`READ_LOCAL_COPY`: after a copy-local, or a cache that later
    epochs read), or both (the first epoch streams, the later ones read the cache); or a sample
    packed into tar shards on local disk (`READ_PACKED`: after a reshard-first,
    `advisor.measure.trial.packed`). The sweep runs on each, the budget split evenly; the last
    is the steady state (`TrialResult.counts`). A local copy or packed sample gets a storage
    probe of its own (`TrialResult.copy_storage`): the model of the local reads takes its first
    byte and bandwidth, not the listed objects'. One that cannot be made (no room, no
    permission, no time) is named in the notes, and the sweep reads the listed objects only.
    Returns what was measured before the budget ran out or `cancel` was set (`cancelled` then).
    The measurements run in a thread of their own, watched from the caller's (`TrialDeadline`): a
    transform that never returns ends the trial with a TimeoutError naming the sample, at most
    `overrun_s(seconds)` past the budget, with progress reported every few seconds meanwhile.
    """
    TrialBudget(seconds)  # raises ValueError naming the range
    raw = load_transform(workload.transform) if workload.transform else None
    default = (
        records_as_they_are if profile.record_format else default_decoder(profile.dominant_format)
    )
    transform = WatchedTransform(raw or default)
    stop = threading.Event()  # the caller's cancel, or the deadline calling time
    deadline = TrialDeadline(seconds, transform, progress)
    clock = TrialClock(seconds, stop, deadline.report)
    return deadline.run(
        lambda: _measure(
            location,
            profile,
            hardware,
            workload,
            credentials,
            clock,
            transform,
            read_paths,
            scratch_dir,
        ),
        stop,
        cancel,
    )


def _measure(
    location: DatasetLocation,
    profile: DatasetProfile,
    hardware: HardwareProfile,
    workload: Workload,
    credentials: Credentials | None,
    clock: TrialClock,
    transform: WatchedTransform,
    read_paths: tuple[str, ...],
    scratch_dir: Path | None,
) -> TrialResult:
    seconds = clock.seconds
    fmt = profile.dominant_format
    records = profile.record_format
    transform_name = workload.transform or (
        f"records as they are ({records})" if records else f"default decoder for {fmt}"
    )
    storage = decode = handover = None
    probes: dict[str, StorageProbe] = {}  # per read path, its storage as probed
    inflight: int | None = None
    budget: int | None = None
    measured: list[ReadPathSweep] = []
    h2d = None
    gpu_decode: GpuDecode | None = None
    notes: list[str] = []
    cancelled = False
    scratch: Path | None = None
    sample_copy: SampleCopy | None = None
    refused: dict[int, str] = {}  # counts whose batches /dev/shm could not hold: why
    paths = tuple(dict.fromkeys(read_paths)) or (READ_LISTED,)
    try:
        clock.report("storage", "listing objects for the trial")
        data = TrialData.sample(location, fmt, transform, credentials)
        check_names(data.objects)
        data = dataclasses.replace(
            data, samples_per_item=_samples_per_item(profile, fmt), records=records,
            epoch_objects=-(-profile.object_count // workload.ranks),
        )  # fmt: skip
        if records is not None:
            notes.append(
                f"the text shards were read as records ({records}), streamed: a sample is a "
                "record, and samples/s are records/s"
            )
        levels = LOCAL_LEVELS if location.storage == "local" else CONCURRENCY_LEVELS
        storage = probe_storage(data, clock, seconds * BUDGET_SHARES["storage"], levels)
        clock.check()
        decode = measure_decode(data, transform_name, clock, seconds * BUDGET_SHARES["decode"])
        batch_items = data.items_per_batch(workload.batch_size)
        handover = measure_handover(
            handover_samples(data, batch_items), batch_items, clock,
            seconds * BUDGET_SHARES["handover"],
        )  # fmt: skip
        inflight = _inflight_for(storage, data, decode)
        budget = _budget_for(data, hardware, workload)
        data = data.with_inflight(inflight, budget)
        sources = {READ_LISTED: data}
        probes[READ_LISTED] = storage
        made = next((path for path in paths if path in MADE), None)
        if made is not None:
            try:
                scratch = Path(tempfile.mkdtemp(prefix="loader-advisor-trial-", dir=scratch_dir))
                made_data, sample_copy = _make_sample(made, data, location, scratch, clock)
                if made == READ_PACKED:  # streamed shards: the budget for streams
                    made_data = made_data.with_inflight(
                        inflight, _budget_for(made_data, hardware, workload)
                    )
                probes[made] = probe_storage(
                    made_data, clock, seconds * BUDGET_SHARES["copy_probe"],
                    LOCAL_LEVELS, phase="copy",
                )  # fmt: skip
                sources[made] = made_data
                budget = made_data.config.max_inflight_bytes  # recorded: what the sweep read with
            except (CopyUnavailable, OSError) as exc:
                notes.append(
                    f"the trial could not make {MADE[made]} training reads ({exc}); it "
                    "measured the listed objects, and the model predicts what training reads"
                )
                paths = (READ_LISTED,)
        clock.report(
            "sweep",
            f"the sweep reads with up to {inflight} requests and {budget >> 20} MiB at once "
            "per process",
        )
        for index, path in enumerate(paths):
            share = 1.0 / (len(paths) - index)  # of what is left for the sweep
            local = path in MADE or location.storage == "local"
            # what the earlier phases left, less the copy test's share and the loaders' shutdown
            left = clock.seconds * (1 - BUDGET_SHARES["h2d"] - SHUTDOWN_SHARE) - clock.used()
            sweep_s = max(left * share, clock.seconds * BUDGET_SHARES["sweep"] * share / 4)
            sweep, counts = sweep_counts(
                sources[path], hardware, workload, clock, probes[path], decode, path, sweep_s,
                local=local, refused=refused,
            )  # fmt: skip
            measured.append(ReadPathSweep(path, sweep, counts))
            notes += [
                _lower_bound_note(c.num_workers, c.median, seconds) for c in counts if c.lower_bound
            ]
        if fmt == "jpeg" and not workload.transform and decode is not None:
            found = probe_gpu_decode(sources[READ_LISTED], workload, clock)
            if isinstance(found, str):
                notes.append(f"GPU decode not measured: {found}")
            else:
                gpu_decode = found
        h2d = host_to_device(workload, decode, clock)
        if h2d is None:
            notes.append("no CUDA device: host-to-device copy and pin_memory not measured")
    except TrialCancelled:
        cancelled = True
        notes.append(f"cancelled after {clock.used():.1f} s")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if refused:  # one line: the lowest count's words (the others' differ by their numbers)
        which = ", ".join(map(str, sorted(refused)))
        notes.append(f"num_workers {which} not measured: {refused[min(refused)]}")
    clock.report("done", "trial cancelled" if cancelled else "trial done")
    steady = measured[-1] if measured else ReadPathSweep(paths[-1])
    return TrialResult(
        uri=location.uri,
        seconds_budget=seconds,
        seconds_used=clock.used(),
        storage=storage,
        decode=decode,
        sweep=steady.sweep,
        counts=steady.counts,
        host_to_device=h2d,
        gpu_decode=gpu_decode,
        cancelled=cancelled,
        notes=tuple(notes),
        requests_in_flight=inflight,
        inflight_bytes=budget,
        setup=TrialSetup.of(workload, hardware.usable_cores, steady.read_path),
        first_epoch=measured[0] if len(measured) > 1 else None,
        copy_storage=next((probes[p] for p in paths if p in MADE and p in probes), None),
        sample_copy=sample_copy if READ_LOCAL_COPY in paths else None,
        shm_refused=tuple(sorted(refused)),
        handover=handover,
    )


def _make_sample(
    path: str, data: TrialData, location: DatasetLocation, scratch: Path, clock: TrialClock
) -> tuple[TrialData, SampleCopy | None]:
    """The sample `path` reads, made in `scratch` within the copy's share of the budget: a
    local copy of the sampled objects (and the copy, timed), or the objects packed into tar
    shards."""
    seconds = clock.seconds * BUDGET_SHARES["copy"]
    if path == READ_PACKED:
        return pack_sample(data, location.prefix_uri(), scratch, clock, seconds), None
    return copy_sample(data, scratch, clock, seconds)


def records_as_they_are(record: Any) -> Any:
    """The default transform of records: a line (``str``), a parsed JSON line or a CSV row is
    already what training takes; the user's transform, when given, replaces it per record."""
    return record


def _samples_per_item(profile: DatasetProfile, fmt: str) -> float:
    """Samples in one item the trial's dataset yields (`TrialData.samples_per_item`): tar shards
    yield their members one by one and text shards read as records their records; other objects
    are one item each, holding the records the profile counted in them."""
    if fmt == "tar" or profile.record_format is not None:
        return 1.0
    counted = next((f.samples_per_object for f in profile.formats if f.name == fmt), None)
    return max(1.0, counted or 1.0)


def _inflight_for(probe: StorageProbe, data: TrialData, decode: DecodeCost) -> int:
    """Requests in flight per process for the sweep: enough for the most a process can deliver
    (its transform's measured CPU cost included) at the measured latency (Little's law,
    `advisor.core.model.requests_in_flight`)."""
    object_bytes = data.mean_object_bytes
    samples_per_object = max(1.0, object_bytes / max(decode.bytes_per_sample, 1.0))
    return requests_in_flight(
        probe.first_byte_p50_s,
        object_bytes,
        max(probe.per_connection_mb_s, 1e-3),
        process_objects_per_s(object_bytes, decode.cpu_s_per_sample * samples_per_object),
    )


def _budget_for(data: TrialData, hardware: HardwareProfile, workload: Workload) -> int:
    """The byte budget per process for the sweep (`advisor.core.model.inflight_bytes`), for the
    sampled objects' mean size (streamed ones: their read-ahead)."""
    return inflight_bytes(
        data.mean_object_bytes,
        hardware.ram_available_bytes,
        hardware.usable_cores,
        workload.gpus_per_node,
        streamed=data.streamed,
    )

"""Results built by hand, for the tests of the rules, the recommendation and what people read of
it (decide/, front/test_wording.py, measure/test_gpu_decode.py): a data set's profile, a
machine, a trial, and a rule context built from a case's overrides (decide/rule_cases/).

Two baselines: `make_profile`/`make_hardware`/`make_trial`/`make_ctx` are the rule cases' (150 GB
of 150 MB tar shards, 16 cores, one A100), and `profile`/`hardware`/`trial` the recommendation's
scenarios' (an 8-core machine with L4s).
"""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

from advisor.core.workload import Workload
from advisor.decide.rules import Context
from advisor.measure.hardware import DiskInfo, GpuInfo, HardwareProfile
from advisor.measure.hardware.gpu_decode import GpuDecode, GpuDecodePoint
from advisor.measure.hardware.target import TargetMachine
from advisor.measure.profile import DatasetProfile, FormatInfo, SizeStats
from advisor.measure.trial.probe_results import DecodeCost, HostToDevice, SampleCopy, StorageProbe
from advisor.measure.trial.results import LoaderPoint, TrialResult, TrialSetup, summarise

MB, GB, TB = 10**6, 10**9, 10**12
L4 = GpuInfo(0, "NVIDIA L4", 24 * 2**30, 1, 4, 16, 16, None, "550.54.15", 12040)


# --- the rule cases' baseline: 150 GB of 150 MB tar shards, 16 cores, one A100 -----------


def make_profile(
    count: int = 1000,
    size: int = 150 * MB,
    fmt: str = "tar",
    spo: float | None = 1000.0,
    prefixes: int = 1,
    uri: str = "s3://bucket/train/",
    records: str | None = None,
    endpoint_url: str | None = None,
) -> DatasetProfile:
    storage = "s3" if uri.startswith("s3://") else "local"
    listed = min(count, 1000)
    return DatasetProfile(
        uri=uri,
        storage=storage,
        object_count=count,
        total_bytes=count * size,
        sizes=SizeStats(size, size, size, size, size, float(size)),
        formats=(FormatInfo(fmt, listed, listed * size, spo, records),),
        distinct_prefixes=prefixes,
        listed_objects=listed,
        endpoint_url=endpoint_url,
    )


A100 = GpuInfo(0, "NVIDIA A100-SXM4-80GB", 80 * 2**30, 4, 4, 16, 16, 12, "535.129.03", 12020)


def make_hardware(
    cores: float = 16,
    ram_available: int | None = 60 * GB,
    shm: int | None = 32 * GB,
    disk_free: int | None = 2 * TB,
    gpus: int = 1,
    target: dict[str, Any] | None = None,
    shm_free: int | None = None,
) -> HardwareProfile:
    """A machine of `cores` (a fraction for a quota); with `target` (TargetMachine's fields),
    planned for that machine, this one measuring. `shm_free`: /dev/shm's free bytes as probed
    (None: not probed)."""
    disk = None if disk_free is None else DiskInfo("/scratch", disk_free, 4 * TB, "nvme")
    if target is not None:
        here = make_hardware(cores, ram_available, shm, disk_free, gpus, shm_free=shm_free)
        return here.planned_for(TargetMachine(**target))
    return HardwareProfile(
        gpus=tuple(dataclasses.replace(A100, index=i) for i in range(gpus)),
        cpu_count=cores,
        affinity_cores=cores,
        usable_cores=cores,
        ram_total_bytes=64 * GB,
        ram_available_bytes=ram_available,
        shm_bytes=shm,
        disk=disk,
        shm_free_bytes=shm_free,
    )


def make_trial(
    rates: dict[int, float | tuple[float, ...]] | None = None,
    pinned: float = 24.0,
    pageable: float = 10.0,
    rss_bytes: int = 300 * 2**20,
    inflight: int | None = None,
    budget: int | None = None,
    unsteady: tuple[int, ...] = (),
    spin: dict[int, tuple[float, ...]] | None = None,
    prefetch: int = 2,
    setup: dict[str, Any] | None = None,
    output_bytes: float | None = None,
    gpu_images_per_s: float | None = None,
    sample_copy: tuple[int, int, float] | None = None,
    shm_refused: tuple[int, ...] = (),
) -> TrialResult:
    """A trial whose training-loop sweep measured `rates` per num_workers (a tuple: one slice
    each); with `spin`, those are the blocking step's slices and `spin` the spinning step's.
    `output_bytes`: the decoder's output per sample; `gpu_images_per_s`: a JPEG decode measured
    on this machine's GPU (of images of output_bytes / 3 pixels, or 0.5 Mpixel); `shm_refused`:
    the counts whose batches /dev/shm could not hold."""
    rates = rates if rates is not None else {0: 200.0, 1: 240.0, 2: 470.0, 4: 900.0, 8: 1500.0}

    def slices(w: int, values: float | tuple[float, ...], step: str) -> list[LoaderPoint]:
        values = values if isinstance(values, tuple) else (values,)
        return [
            LoaderPoint(
                w,
                False,
                None if w == 0 else prefetch,
                2000,
                2000 / r,
                r,
                r * 0.15,
                0.5,
                rss_bytes,
                steady=w not in unsteady,
                step=step,
            )
            for r in values
        ]

    sweep = [p for w, r in rates.items() for p in slices(w, r, "sleep" if spin else "none")]
    sweep += [p for w, r in (spin or {}).items() for p in slices(w, r, "spin")]
    return TrialResult(
        uri="s3://bucket/train/",
        seconds_budget=60,
        seconds_used=55,
        storage=StorageProbe(20, 20 * 150 * MB, 0.025, 0.060, 85.0, ((1, 85, 0.6), (8, 600, 4))),
        decode=DecodeCost("default", 500, 0.004, 150e3, output_bytes_per_sample=output_bytes),
        sweep=tuple(sweep),
        counts=summarise(sweep),
        host_to_device=HostToDevice(32 * 150_000, pinned, pageable),
        requests_in_flight=inflight,
        inflight_bytes=budget,
        setup=None if setup is None else TrialSetup(**setup),
        gpu_decode=None
        if gpu_images_per_s is None
        else _gpu_decode(gpu_images_per_s, output_bytes),
        sample_copy=None if sample_copy is None else SampleCopy(*sample_copy),
        shm_refused=shm_refused,
    )


def _gpu_decode(images_per_s: float, output_bytes: float | None) -> GpuDecode:
    pixels = (output_bytes or 1.5e6) / 3
    point = GpuDecodePoint(
        pixels, 150e3, images_per_s, images_per_s, images_per_s, 64e3 / images_per_s, 1e-4
    )
    return GpuDecode(A100.name, 64, (point,))


def make_ctx(case: dict[str, Any]) -> Context:
    workload = {"consumer_rate": 1000.0, **case.get("workload", {})}
    trial = case.get("trial")
    return Context(
        profile=make_profile(**case.get("profile", {})),
        hardware=make_hardware(**case.get("hardware", {})),
        workload=Workload(**workload),
        trial=make_trial(**trial) if trial is not None else None,
        data_fs=case.get("data_fs"),
    )


# --- the recommendation's scenarios: an 8-core machine, L4s ---------------------------------


def profile(
    count: int,
    size: int,
    fmt: str = "tar",
    spo: float | None = None,
    uri: str = "s3://bucket/train/",
) -> DatasetProfile:
    """`make_profile` with no samples per object unless given."""
    return make_profile(count, size, fmt, spo, uri=uri)


def s3_profile(
    count: int, size: int, fmt: str = "jpeg", records: str | None = None
) -> DatasetProfile:
    """`count` objects of `size` under s3://bucket/train/, no samples per object."""
    return make_profile(count, size, fmt, None, records=records)


def hardware(
    cores: int = 8,
    ram_available: int | None = 30 * GB,
    gpus: int = 0,
    disk_free: int = 1 * TB,
    shm: int = 16 * GB,
) -> HardwareProfile:
    return HardwareProfile(
        gpus=tuple(dataclasses.replace(L4, index=i) for i in range(gpus)),
        cpu_count=cores,
        affinity_cores=cores,
        usable_cores=cores,
        ram_total_bytes=32 * GB,
        ram_available_bytes=ram_available,
        shm_bytes=shm,
        disk=DiskInfo("/tmp", disk_free, 2 * TB, "nvme", "nvme0n1", None, "xfs"),
    )


def trial(
    rates: dict[int, float | tuple[float, ...]],
    uri: str = "s3://bucket/train/",
    object_bytes: int = 150 * MB,
    seconds: tuple[float, float] = (60, 40),
) -> TrialResult:
    """A trial whose sweep measured `rates` per num_workers (a tuple: one slice each), of a data
    set at `uri` whose objects are `object_bytes`, in `seconds` (budget, used)."""
    slices = {w: r if isinstance(r, tuple) else (r,) for w, r in rates.items()}
    return TrialResult(
        uri=uri,
        seconds_budget=seconds[0],
        seconds_used=seconds[1],
        storage=StorageProbe(
            10, 10 * object_bytes, 0.02, 0.05, 80.0, ((1, 80, 0.5), (8, 560, 3.7))
        ),
        decode=DecodeCost("default", 400, 0.003, 150e3),
        sweep=tuple(
            LoaderPoint(w, True, None if w == 0 else 2, 1000, 1000 / r, r, r * 0.15, 0.4, 350)
            for w, rs in slices.items()
            for r in rs
        ),
        host_to_device=HostToDevice(32 * 150_000, 22.0, 9.0),
    )


def ctrl_c_reaches_it() -> None:
    """`preexec_fn` of a child a test stops with SIGINT: Ctrl-C's default action, as a
    terminal's shell gives it. A test run started in the background (`&`, nohup) inherits
    SIGINT ignored, and so would the child: it would finish its work instead of stopping."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

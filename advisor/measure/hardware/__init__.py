"""Hardware profile: GPUs (via NVML), usable CPU cores, RAM, /dev/shm and the local scratch disk.

`probe_hardware` assembles the profile: `nvml` probes the GPUs (the only module that
imports ``pynvml``), `host` reads /proc and /sys, `processes` holds one reading of what a set
of processes has used (the trial's and the loop's count of CPU and memory), `machine` holds the
result types and `catalog` the GPUs a plan can name. Like gpustat's ``nvml.py``, the probe
never raises because a GPU is missing or odd: no GPU, no driver, no NVML library or no
``pynvml`` module give an empty ``gpus`` tuple and a note; a call the device does not support
(``NVML_ERROR_NOT_SUPPORTED``) leaves that field None.

The profile carries no host name or other identifying data, so it can be shared in a report.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from advisor.core.units import GIB
from advisor.measure.hardware.catalog import GPU_CATALOG, GpuSpec, lookup_gpu
from advisor.measure.hardware.host import (
    affinity_cores,
    cgroup_cpu_limit,
    cgroup_memory_limit,
    filesystem_type,
    meminfo,
    probe_disk,
    shm_bytes,
    usable_cores,
)
from advisor.measure.hardware.machine import DiskInfo, GpuInfo, HardwareProfile
from advisor.measure.hardware.nvml import GpuUtilization, load_pynvml, probe_gpus
from native_loader.shm_plan import shm_free_bytes

__all__ = [
    "GPU_CATALOG",
    "DiskInfo",
    "GpuInfo",
    "GpuSpec",
    "GpuUtilization",
    "HardwareProfile",
    "filesystem_type",
    "load_pynvml",
    "lookup_gpu",
    "probe_hardware",
]


def probe_hardware(
    nvml: Any = None,
    path: str | None = None,
    *,
    root: Path = Path("/"),
    shm_path: str = "/dev/shm",
) -> HardwareProfile:
    """Probe this machine. Never raises because a GPU, driver, library or file is missing.

    nvml: an NVML module (pynvml or a fake with the same functions); None imports pynvml lazily.
    path: where a local copy or cache would go (default: the temp dir).
    root: file-system root for /proc and /sys (tests point it at a recorded tree).
    """
    notes: list[str] = []
    if nvml is None:
        nvml, why = load_pynvml()
        if why:
            notes.append(why)
    gpus: tuple[GpuInfo, ...] = ()
    if nvml is not None:
        gpus, gpu_notes = probe_gpus(nvml)
        notes.extend(gpu_notes)

    cpu_count = os.cpu_count() or 1
    affinity = affinity_cores()
    quota = cgroup_cpu_limit(root)
    usable = usable_cores(root)
    if quota is not None and quota < affinity:
        notes.append(f"cgroup CPU quota {quota:g} cores limits the {affinity} CPUs in affinity")

    total, available = meminfo(root)
    limit = cgroup_memory_limit(root)
    if limit is not None:
        total = limit if total is None else min(total, limit)
        available = limit if available is None else min(available, limit)
        notes.append(f"cgroup memory limit {limit / GIB:.1f} GiB")
    if total is None:
        notes.append("RAM unknown: /proc/meminfo unreadable")

    shm = shm_bytes(shm_path)
    if shm is None:
        notes.append(f"{shm_path} not found: DataLoader workers need shared memory")

    disk = probe_disk(path or tempfile.gettempdir(), root)
    if disk is None:
        notes.append(f"local disk unknown: cannot stat {path or tempfile.gettempdir()}")

    return HardwareProfile(
        gpus=gpus,
        cpu_count=cpu_count,
        affinity_cores=affinity,
        cgroup_cpu_limit=quota,
        usable_cores=usable,
        ram_total_bytes=total,
        ram_available_bytes=available,
        shm_bytes=shm,
        disk=disk,
        notes=tuple(notes),
        shm_free_bytes=shm_free_bytes(shm_path),
    )

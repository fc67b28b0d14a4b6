"""The hardware profile's result types: GPUs, the local disk and the whole machine.

The profile carries no host name or other identifying data, so it can be shared in a report.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from advisor.core.bounds import range_of
from advisor.core.location import NETWORK_FILESYSTEMS
from advisor.core.workload import Workload
from advisor.measure.hardware.catalog import PCIE_LANE_GB_S, lookup_gpu
from advisor.measure.hardware.target import TargetMachine


@dataclass(frozen=True)
class GpuInfo:
    """One GPU. Any field is None when NVML does not support the query on that device.

    memory_total_bytes: framebuffer size in bytes.
    pcie_gen_current / pcie_width_current: the link as it runs now (idle GPUs often drop to gen1).
    pcie_gen_max / pcie_width_max: what the device and slot can do; use these for planning.
    nvlink_active_links: NVLink links reported active (0 on PCIe-only cards, None if unsupported).
    driver_version: the NVIDIA driver, e.g. "535.129.03".
    cuda_driver_version: the CUDA version the driver supports, as NVML's integer (12020 = 12.2).
    null_reasons: for every field above that is None, why ("not supported by this GPU
        (NVML_ERROR_NOT_SUPPORTED)", "this pynvml has no nvmlX", or the NVML error).
    """

    index: int
    name: str
    memory_total_bytes: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    nvlink_active_links: int | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None
    null_reasons: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def pcie_max_gb_s(self) -> float | None:
        """Theoretical one-direction PCIe bandwidth of the link at its best (GB/s), if known."""
        if self.pcie_gen_max is None or self.pcie_width_max is None:
            return None
        lane = PCIE_LANE_GB_S.get(self.pcie_gen_max)
        return None if lane is None else lane * self.pcie_width_max

    @property
    def cuda_version(self) -> str | None:
        """cuda_driver_version as "major.minor" (12020 -> "12.2")."""
        v = self.cuda_driver_version
        return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"


@dataclass(frozen=True)
class DiskInfo:
    """The file system holding `path` (the local scratch area a copy would go to).

    kind: "nvme", "ssd", "hdd" or "unknown" (from the block device's name and
        /sys/block/<dev>/queue/rotational). NVMe devices on cloud VMs may be network block storage
        (EBS); `model` tells them apart where the kernel reports it. Virtio/Xen disks (vd*, xvd*)
        claim to be rotational whatever backs them, so they count as "unknown" then.
    """

    path: str
    free_bytes: int
    total_bytes: int
    kind: str = "unknown"
    device: str | None = None
    model: str | None = None
    filesystem: str | None = None

    @property
    def is_network_fs(self) -> bool:
        return (self.filesystem or "") in NETWORK_FILESYSTEMS


@dataclass(frozen=True)
class HardwareProfile:
    """What this machine (or the planned training machine) offers the data loader.

    gpus: probed GPUs, or catalogued ones when `planned` is True.
    cpu_count: logical CPUs in the machine (os.cpu_count()).
    affinity_cores: CPUs this process may run on (os.sched_getaffinity).
    cgroup_cpu_limit: CPU quota in cores from cgroup (cpu.max / cfs_quota), None when unlimited.
    usable_cores: the cores' worth of CPU time the process can use: min(affinity, quota), a
        fraction under a fractional quota (1.5 cores of CPU time is 1.5, not 1).
    ram_total_bytes / ram_available_bytes: /proc/meminfo MemTotal / MemAvailable, lowered to the
        cgroup memory limit when one is set; None when unknown.
    shm_bytes: size of /dev/shm (DataLoader workers hand batches over through it); None if absent.
    disk: the local scratch file system (a copy or cache would go there); None if not probed.
    planned: True when the GPUs come from GPU_CATALOG (profiled elsewhere than training), or
        the whole machine is a target (`target`).
    target_gpu: the catalog name when planned.
    target: the training machine this profile plans for (`planned_for`); None: this machine.
    measured_cores: with a target, the usable cores of the machine the trial measured on;
        None: this is that machine.
    notes: what the probe could not find out, in plain words.
    shm_free_bytes: bytes of /dev/shm free when probed (other processes' shared memory left
        out): what a DataLoader's batches in flight may take; None if absent or not probed.
    """

    gpus: tuple[GpuInfo, ...] = ()
    cpu_count: int = 1
    affinity_cores: int = 1
    cgroup_cpu_limit: float | None = None
    usable_cores: float = 1
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    shm_bytes: int | None = None
    disk: DiskInfo | None = None
    planned: bool = False
    target_gpu: str | None = None
    target: TargetMachine | None = None
    measured_cores: float | None = None
    notes: tuple[str, ...] = field(default=())
    shm_free_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.usable_cores < 0:
            raise ValueError(f"usable_cores={self.usable_cores} must be >= 0")
        for name in ("ram_total_bytes", "ram_available_bytes", "shm_bytes", "shm_free_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name}={value} must be >= 0")

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    def with_target_gpu(self, name: str, count: int = 1) -> HardwareProfile:
        """This host's CPU/RAM/disk with `count` catalogued `name` GPUs, marked as planned."""
        per_node = range_of(Workload, "gpus_per_node")  # a planned machine is one node
        if count not in per_node:
            raise ValueError(f"{count=} must be {per_node}")
        spec = lookup_gpu(name)
        gpus = tuple(
            GpuInfo(
                index=i,
                name=spec.name,
                memory_total_bytes=spec.memory_total_bytes,
                pcie_gen_current=spec.pcie_gen,
                pcie_gen_max=spec.pcie_gen,
                pcie_width_current=spec.pcie_width,
                pcie_width_max=spec.pcie_width,
                nvlink_active_links=spec.nvlink_links,
            )
            for i in range(count)
        )
        note = f"planned: {count} x {spec.name} from the catalog, not probed on this machine"
        return dataclasses.replace(
            self, gpus=gpus, planned=True, target_gpu=spec.name, notes=(*self.notes, note)
        )

    @property
    def trial_cores(self) -> float:
        """The usable cores of the machine a trial ran on: this one's, or with a target, the
        one that measured."""
        return self.usable_cores if self.measured_cores is None else self.measured_cores

    def planned_for(self, target: TargetMachine, gpus_per_node: int = 1) -> HardwareProfile:
        """The target machine as the plan sees it: its cores, RAM, /dev/shm, local disk and
        network, its GPUs from the catalogue (`gpus_per_node` of them where it counts none; no
        GPU where it names and counts none);
        this machine's usable cores kept as `measured_cores` (the trial ran on them)."""
        planned = dataclasses.replace(self, gpus=(), target_gpu=None)
        if target.gpu is not None:
            planned = self.with_target_gpu(target.gpu, target.gpus or gpus_per_node)
        elif target.gpus:  # GPUs the plan counts but cannot name
            unnamed = tuple(
                GpuInfo(index=i, name="GPU (model not given)") for i in range(target.gpus)
            )
            planned = dataclasses.replace(planned, gpus=unnamed)
        # a figure the target does not give is this machine's (its `assumptions` say so)
        disk = self.disk
        if target.local_disk_bytes is not None:
            disk = None  # 0: no local disk (EBS only)
        if target.local_disk_bytes:
            disk = DiskInfo(
                path="the target's local disk", free_bytes=target.local_disk_bytes,
                total_bytes=target.local_disk_bytes, kind="nvme",
            )  # fmt: skip
        ram_total, ram_available = self.ram_total_bytes, self.ram_available_bytes
        if target.ram_bytes is not None:
            ram_total = ram_available = target.ram_bytes
        shm = target.shm_or_default if target.shm_or_default is not None else self.shm_bytes
        note = f"planned for {target.describe()}"
        if target.assumptions():
            note += "; assumes " + "; ".join(target.assumptions())
        return dataclasses.replace(
            planned,
            cpu_count=math.ceil(target.cores),
            affinity_cores=math.ceil(target.cores),
            cgroup_cpu_limit=None if float(target.cores).is_integer() else target.cores,
            usable_cores=target.cores,
            ram_total_bytes=ram_total,
            ram_available_bytes=ram_available,
            shm_bytes=shm,
            # a node the job starts on has its /dev/shm free; else this machine's, as found
            shm_free_bytes=self.shm_free_bytes if target.shm_or_default is None else shm,
            disk=disk,
            planned=True,
            target=target,
            measured_cores=self.trial_cores,
            notes=(note,),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareProfile:
        fields = dict(data)
        fields["gpus"] = tuple(GpuInfo(**g) for g in fields.get("gpus", ()))
        disk = fields.get("disk")
        fields["disk"] = DiskInfo(**disk) if disk is not None else None
        fields["notes"] = tuple(fields.get("notes", ()))
        target = fields.get("target")
        fields["target"] = TargetMachine(**target) if target is not None else None
        return cls(**fields)

"""Hardware profile: GPUs (via NVML), usable CPU cores, RAM, /dev/shm and the local scratch disk.

This is the only module that imports ``pynvml``, and it does so lazily inside
:func:`probe_hardware`. Like gpustat's ``nvml.py``, the probe never raises because a GPU is missing
or odd: no GPU, no driver, no NVML library or no ``pynvml`` module give an empty ``gpus`` tuple and
a note; a call the device does not support (``NVML_ERROR_NOT_SUPPORTED``) leaves that field None.

The profile carries no host name or other identifying data, so it can be shared in a report.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from advisor.bounds import range_of
from advisor.extras import install_command
from advisor.location import NETWORK_FILESYSTEMS
from advisor.workload import Workload

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

# PCIe payload bandwidth per lane and direction, GB/s (after line encoding), by generation.
PCIE_LANE_GB_S: dict[int, float] = {
    1: 0.25,
    2: 0.5,
    3: 0.985,
    4: 1.969,
    5: 3.938,
    6: 7.563,
}

_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED, the same value in every pynvml release
NOT_SUPPORTED_REASON = "not supported by this GPU (NVML_ERROR_NOT_SUPPORTED)"
_FEATURE_ENABLED = 1  # NVML_FEATURE_ENABLED
_DEFAULT_MAX_NVLINKS = 18


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


VIRTUAL_DISK_PREFIXES = ("vd", "xvd")


@dataclass(frozen=True)
class GpuSpec:
    """A catalogued GPU for planning: memory in bytes, PCIe generation and width, NVLink links."""

    name: str
    memory_total_bytes: int
    pcie_gen: int
    pcie_width: int
    nvlink_links: int = 0


_GB = 1_000_000_000
_GIB = 1 << 30

# Common training GPUs, from the vendors' data sheets (memory as marketed; PCIe host link).
GPU_CATALOG: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        GpuSpec("T4", 16 * _GIB, 3, 16),
        GpuSpec("L4", 24 * _GIB, 4, 16),
        GpuSpec("A10G", 24 * _GIB, 4, 16),
        GpuSpec("V100-16GB", 16 * _GIB, 3, 16, nvlink_links=6),
        GpuSpec("V100-32GB", 32 * _GIB, 3, 16, nvlink_links=6),
        GpuSpec("A100-40GB", 40 * _GIB, 4, 16, nvlink_links=12),
        GpuSpec("A100-80GB", 80 * _GIB, 4, 16, nvlink_links=12),
        GpuSpec("H100-SXM", 80 * _GIB, 5, 16, nvlink_links=18),
        GpuSpec("H100-PCIe", 80 * _GIB, 5, 16),
        GpuSpec("H200", 141 * _GB, 5, 16, nvlink_links=18),
        GpuSpec("B200", 180 * _GB, 5, 16, nvlink_links=18),
        GpuSpec("RTX-4090", 24 * _GIB, 4, 16),
    )
}


def _catalog_key(name: str) -> str:
    return "".join(c for c in name.upper() if c.isalnum())


def lookup_gpu(name: str) -> GpuSpec:
    """The catalog entry for `name`, ignoring case, spaces, dashes and a leading "NVIDIA"."""
    key = _catalog_key(name).removeprefix("NVIDIA")
    for spec in GPU_CATALOG.values():
        if _catalog_key(spec.name) == key:
            return spec
    aliases = {"V100": "V100-16GB", "A100": "A100-40GB", "H100": "H100-SXM", "4090": "RTX-4090"}
    for alias, target in aliases.items():
        if key == _catalog_key(alias):
            return GPU_CATALOG[target]
    known = ", ".join(GPU_CATALOG)
    raise ValueError(f"unknown GPU {name!r}; the catalog knows: {known}")


@dataclass(frozen=True)
class HardwareProfile:
    """What this machine (or the planned training machine) offers the data loader.

    gpus: probed GPUs, or catalogued ones when `planned` is True.
    cpu_count: logical CPUs in the machine (os.cpu_count()).
    affinity_cores: CPUs this process may run on (os.sched_getaffinity).
    cgroup_cpu_limit: CPU quota in cores from cgroup (cpu.max / cfs_quota), None when unlimited.
    usable_cores: whole cores the process can use: min(affinity, quota), at least 1.
    ram_total_bytes / ram_available_bytes: /proc/meminfo MemTotal / MemAvailable, lowered to the
        cgroup memory limit when one is set; None when unknown.
    shm_bytes: size of /dev/shm (DataLoader workers hand batches over through it); None if absent.
    disk: the local scratch file system (a copy or cache would go there); None if not probed.
    planned: True when the GPUs come from GPU_CATALOG (profiled elsewhere than training).
    target_gpu: the catalog name when planned.
    notes: what the probe could not find out, in plain words.
    """

    gpus: tuple[GpuInfo, ...] = ()
    cpu_count: int = 1
    affinity_cores: int = 1
    cgroup_cpu_limit: float | None = None
    usable_cores: int = 1
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    shm_bytes: int | None = None
    disk: DiskInfo | None = None
    planned: bool = False
    target_gpu: str | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.usable_cores < 0:
            raise ValueError(f"usable_cores={self.usable_cores} must be >= 0")
        for name in ("ram_total_bytes", "ram_available_bytes", "shm_bytes"):
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
            raise ValueError(f"{count=} must be in {per_node}")
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareProfile:
        fields = dict(data)
        fields["gpus"] = tuple(GpuInfo(**g) for g in fields.get("gpus", ()))
        disk = fields.get("disk")
        fields["disk"] = DiskInfo(**disk) if disk is not None else None
        fields["notes"] = tuple(fields.get("notes", ()))
        return cls(**fields)


# ---------------------------------------------------------------------------------------------
# GPUs


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _Nvml:
    """Calls into an NVML module, turning NotSupported into None and other errors into notes."""

    def __init__(self, module: Any) -> None:
        self.m = module
        self.notes: list[str] = []
        self.why_none = ""  # why the last call that answered None did so

    def is_nvml_error(self, exc: BaseException) -> bool:
        error_type = getattr(self.m, "NVMLError", None)
        return isinstance(error_type, type) and isinstance(exc, error_type)

    def not_supported(self, exc: BaseException) -> bool:
        code = getattr(self.m, "NVML_ERROR_NOT_SUPPORTED", _NOT_SUPPORTED)
        return getattr(exc, "value", None) == code

    def call(self, what: str, fn_name: str, *args: Any) -> Any:
        fn = getattr(self.m, fn_name, None)
        if fn is None:
            self.why_none = f"this pynvml has no {fn_name}"
            self.notes.append(f"{what}: {self.why_none}")
            return None
        try:
            value = fn(*args)
        except Exception as exc:
            if self.is_nvml_error(exc) and self.not_supported(exc):
                self.why_none = NOT_SUPPORTED_REASON
                return None
            self.why_none = f"{type(exc).__name__}: {exc}"
            self.notes.append(f"{what}: {self.why_none}")
            return None
        if value is None:
            self.why_none = f"{fn_name} answered nothing"
        return value

    def nvlink_links(self, handle: Any, index: int) -> int | None:
        fn = getattr(self.m, "nvmlDeviceGetNvLinkState", None)
        if fn is None:
            self.why_none = "this pynvml has no nvmlDeviceGetNvLinkState"
            return None
        max_links = int(getattr(self.m, "NVML_NVLINK_MAX_LINKS", _DEFAULT_MAX_NVLINKS))
        enabled = getattr(self.m, "NVML_FEATURE_ENABLED", _FEATURE_ENABLED)
        active = 0
        for link in range(max_links):
            try:
                state = fn(handle, link)
            except Exception as exc:
                if link == 0 and self.is_nvml_error(exc) and self.not_supported(exc):
                    self.why_none = NOT_SUPPORTED_REASON
                    return None
                if link == 0 and not self.is_nvml_error(exc):
                    self.why_none = f"{type(exc).__name__}: {exc}"
                    self.notes.append(f"GPU {index} NVLink: {self.why_none}")
                    return None
                break  # past the device's last link (InvalidArgument / NotSupported)
            if state == enabled:
                active += 1
        return active


def _probe_gpus(module: Any) -> tuple[tuple[GpuInfo, ...], list[str]]:
    nv = _Nvml(module)
    try:
        module.nvmlInit()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return (), [f"no GPU information: NVML could not start ({reason})"]
    try:
        count = nv.call("GPU count", "nvmlDeviceGetCount")
        if not count:
            return (), [*nv.notes, "NVML found no GPU"]
        system: dict[str, str] = {}
        driver = nv.call("driver version", "nvmlSystemGetDriverVersion")
        if driver is None:
            system["driver_version"] = nv.why_none
        cuda = nv.call("CUDA driver version", "nvmlSystemGetCudaDriverVersion")
        if cuda is None:
            system["cuda_driver_version"] = nv.why_none
        gpus = []
        for i in range(int(count)):
            handle = nv.call(f"GPU {i}", "nvmlDeviceGetHandleByIndex", i)
            if handle is None:
                continue
            gpus.append(_probe_gpu(nv, handle, i, driver, cuda, system))
        return tuple(gpus), nv.notes
    finally:
        try:
            module.nvmlShutdown()
        except Exception as exc:
            nv.notes.append(f"NVML shutdown: {type(exc).__name__}: {exc}")


def _probe_gpu(
    nv: _Nvml, handle: Any, i: int, driver: Any, cuda: Any, system: dict[str, str]
) -> GpuInfo:
    """One GPU's answers; `null_reasons` says why each field left None is None."""
    reasons = dict(system)

    def ask(field_name: str, fn_name: str) -> Any:
        value = nv.call(f"GPU {i} {field_name}", fn_name, handle)
        if value is None:
            reasons[field_name] = nv.why_none
        return value

    name = ask("name", "nvmlDeviceGetName")
    reasons.pop("name", None)  # the name falls back to "unknown", never None
    memory = ask("memory_total_bytes", "nvmlDeviceGetMemoryInfo")
    total = getattr(memory, "total", None)
    if memory is not None and total is None:
        reasons["memory_total_bytes"] = "nvmlDeviceGetMemoryInfo answered no total"
    nvlinks = nv.nvlink_links(handle, i)
    if nvlinks is None:
        reasons["nvlink_active_links"] = nv.why_none
    return GpuInfo(
        index=i,
        name=_text(name) if name is not None else "unknown",
        memory_total_bytes=int(total) if total is not None else None,
        pcie_gen_current=_opt_int(ask("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration")),
        pcie_gen_max=_opt_int(ask("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration")),
        pcie_width_current=_opt_int(ask("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth")),
        pcie_width_max=_opt_int(ask("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth")),
        nvlink_active_links=nvlinks,
        driver_version=_text(driver) if driver is not None else None,
        cuda_driver_version=_opt_int(cuda),
        null_reasons=reasons,
    )


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


class GpuUtilization:
    """Samples GPU `index`'s utilisation (NVML: percent of time a kernel was running) in a thread.

    `with GpuUtilization() as util: ...` then `util.samples`; no samples without NVML or a GPU.
    """

    def __init__(self, index: int = 0, interval_s: float = 0.1, nvml: Any = None) -> None:
        self.index, self.interval_s = index, interval_s
        self.nvml: Any = nvml if nvml is not None else load_pynvml()[0]
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuUtilization:
        if self.nvml is None:
            return self
        try:
            self.nvml.nvmlInit()
            handle = self.nvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception:
            return self  # no GPU: an empty series, like the probe's empty tuple
        self._thread = threading.Thread(target=self._run, args=(handle,), daemon=True)
        self._thread.start()
        return self

    def _run(self, handle: Any) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.samples.append(int(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except Exception:
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self.nvml.nvmlShutdown()


def load_pynvml() -> tuple[ModuleType | None, str | None]:
    try:
        import pynvml
    except ImportError:
        return (
            None,
            f"no GPU probe available: nvidia-ml-py is not installed ({install_command('gpu')})",
        )
    except Exception as exc:  # a broken install raising at import
        return None, f"no GPU information: pynvml is not importable ({type(exc).__name__})"
    return pynvml, None


# ---------------------------------------------------------------------------------------------
# CPU, memory, shared memory, disk


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _affinity_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cgroup_dirs(root: Path, controller: str) -> list[Path]:
    """cgroup directories that may hold this process's limits, most specific first.

    /proc/self/cgroup names the process's cgroup ("0::/path" for v2, "N:cpu,cpuacct:/path" for
    v1); inside a container with its own cgroup namespace that path is "/" and the limits sit at
    the mount root, which is always tried last.
    """
    base = root / "sys/fs/cgroup"
    dirs: list[Path] = []
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.strip().lstrip("/")
        if controllers == "":
            dirs.append(base / rel)
        elif controller in controllers.split(","):
            dirs.append(base / controllers / rel)
    v1 = {"cpu": ("cpu", "cpu,cpuacct"), "memory": ("memory",)}[controller]
    return [*dirs, base, *(base / name for name in v1)]


def cgroup_cpu_limit(root: Path) -> float | None:
    """CPU quota in cores from cgroup v2 (cpu.max) or v1 (cpu.cfs_quota_us); None if unlimited."""
    for directory in _cgroup_dirs(root, "cpu"):
        v2 = _read(directory / "cpu.max")
        if v2:
            parts = v2.split()
            if len(parts) == 2 and parts[0] != "max":
                try:
                    return int(parts[0]) / int(parts[1])
                except (ValueError, ZeroDivisionError):
                    return None
            return None
        quota = _read(directory / "cpu.cfs_quota_us")
        period = _read(directory / "cpu.cfs_period_us")
        if quota and period:
            try:
                q, p = int(quota), int(period)
            except ValueError:
                return None
            return q / p if q > 0 and p > 0 else None
    return None


def cgroup_memory_limit(root: Path) -> int | None:
    """Memory limit in bytes from cgroup v2 (memory.max) or v1; None if unlimited."""
    for directory in _cgroup_dirs(root, "memory"):
        for name in ("memory.max", "memory.limit_in_bytes"):
            text = _read(directory / name)
            if text is None:
                continue
            text = text.strip()
            if text == "max":
                return None
            try:
                value = int(text)
            except ValueError:
                return None
            return value if value < (1 << 60) else None  # v1 "unlimited" is a huge number
    return None


def meminfo(root: Path) -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo."""
    text = _read(root / "proc/meminfo")
    if text is None:
        return None, None
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
            values[name.strip()] = int(parts[0]) * scale
    return values.get("MemTotal"), values.get("MemAvailable", values.get("MemFree"))


def mount_for(path: str, root: Path) -> tuple[str | None, str | None, str | None]:
    """(mount point, device, file system type) of the longest /proc/mounts entry holding path."""
    text = _read(root / "proc/mounts")
    if text is None:
        return None, None, None
    target = os.path.realpath(path)
    best: tuple[str | None, str | None, str | None] = (None, None, None)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        device, mount_point, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best[0] or ""):
            best = (mount_point, device, fstype)
    return best


def filesystem_type(path: str, root: Path = Path("/")) -> str | None:
    """The file system type ("ext4", "nfs4", "lustre", ...) of the mount holding `path`."""
    return mount_for(path, root)[2]


def disk_kind(device_name: str, sys_root: Path) -> tuple[str, str | None]:
    """("nvme" | "ssd" | "hdd" | "unknown", model) for a block device name such as "nvme0n1p1"."""
    block = sys_root / "block"
    name = device_name
    if not (block / name).exists():
        # a partition: find the whole disk that has it as a child
        for disk in sorted(block.iterdir()) if block.is_dir() else []:
            if (disk / name).exists():
                name = disk.name
                break
    model = _read(block / name / "device/model")
    model = model.strip() if model else None
    if name.startswith("nvme"):
        return "nvme", model
    rotational = _read(block / name / "queue/rotational")
    if rotational is None:
        return "unknown", model
    if rotational.strip() == "1":
        # virtio/Xen disks of cloud VMs report rotational=1 whatever backs them
        return ("unknown" if name.startswith(VIRTUAL_DISK_PREFIXES) else "hdd"), model
    return "ssd", model


def probe_disk(path: str, root: Path = Path("/")) -> DiskInfo | None:
    """Free space, kind and file system of the file system holding `path`."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    _, device, fstype = mount_for(path, root)
    kind, model, dev_name = "unknown", None, None
    if device and device.startswith("/dev/"):
        # /dev/root and /dev/disk/by-* are symlinks on the live system
        resolved = os.path.realpath(device) if root == Path("/") else device
        dev_name = os.path.basename(resolved)
        kind, model = disk_kind(dev_name, root / "sys")
    return DiskInfo(
        path=path,
        free_bytes=usage.free,
        total_bytes=usage.total,
        kind=kind,
        device=dev_name,
        model=model,
        filesystem=fstype,
    )


def _shm_bytes(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


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
        gpus, gpu_notes = _probe_gpus(nvml)
        notes.extend(gpu_notes)

    cpu_count = os.cpu_count() or 1
    affinity = _affinity_cores()
    quota = cgroup_cpu_limit(root)
    usable = affinity if quota is None else min(affinity, max(1, math.floor(quota)))
    if quota is not None and quota < affinity:
        notes.append(f"cgroup CPU quota {quota:g} cores limits the {affinity} CPUs in affinity")

    total, available = meminfo(root)
    limit = cgroup_memory_limit(root)
    if limit is not None:
        total = limit if total is None else min(total, limit)
        available = limit if available is None else min(available, limit)
        notes.append(f"cgroup memory limit {limit / _GIB:.1f} GiB")
    if total is None:
        notes.append("RAM unknown: /proc/meminfo unreadable")

    shm = _shm_bytes(shm_path)
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
        usable_cores=max(1, usable),
        ram_total_bytes=total,
        ram_available_bytes=available,
        shm_bytes=shm,
        disk=disk,
        notes=tuple(notes),
    )

"""The host as /proc, /sys and the file systems show it: cores, cgroup limits, memory, mounts,
disks, shared memory, the CPU and memory of processes. The one module that reads the machine
from /proc (the demo reads only its ports' listeners); every reader takes the root it reads."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from advisor.measure.hardware.machine import DiskInfo

VIRTUAL_DISK_PREFIXES = ("vd", "xvd")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def affinity_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def usable_cores(root: Path = Path("/")) -> float:
    """The cores' worth of CPU time this process may use: its CPU affinity, within a cgroup's
    CPU quota. A fractional quota counts as what it is (Kubernetes' `cpu: 1500m` is 1.5 cores
    of CPU time, which 2 processes can share), not rounded down."""
    quota = cgroup_cpu_limit(root)
    affinity = affinity_cores()
    return float(affinity) if quota is None else min(float(affinity), quota)


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


def shm_bytes(path: str) -> int | None:
    """The size of /dev/shm at `path` (statvfs f_blocks); None where it is absent."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


def quota_group_cpu_s(root: Path = Path("/")) -> float | None:
    """CPU seconds so far of this process's cgroup where a CPU quota holds it (all it may use,
    whatever the cores around it do): v2's `cpu.stat` usage, v1's `cpuacct.usage` where the
    controllers share the group, else its processes' CPU summed. None: no quota."""
    for directory in _cgroup_dirs(root, "cpu"):
        v2 = _read(directory / "cpu.max")
        if v2:
            if v2.split()[0] == "max":
                return None
            lines = (_read(directory / "cpu.stat") or "").splitlines()
            usage = next((line[11:] for line in lines if line.startswith("usage_usec ")), "")
            return int(usage) / 1e6 if usage.strip().isdigit() else None
        quota = _read(directory / "cpu.cfs_quota_us")
        if quota is None:
            continue
        if not quota.strip().lstrip("-").isdigit() or int(quota) <= 0:  # -1: no quota here
            return None
        usage = (_read(directory / "cpuacct.usage") or "").strip()
        if usage.isdigit():
            return int(usage) / 1e9
        pids = (_read(directory / "cgroup.procs") or "").split()
        return sum(cpu_seconds(int(pid), root) for pid in pids if pid.isdigit())
    return None


def busy_cpu_s(cpus: frozenset[int], root: Path = Path("/")) -> float:
    """Busy CPU seconds so far of what this process may use: under a CPU quota its group's own
    (`quota_group_cpu_s`: a share of a big machine is not its busy cores); else of the cores
    `cpus` (`/proc/stat`: all but idle and iowait). 0 where it cannot be read."""
    group = quota_group_cpu_s(root)
    if group is not None:
        return group
    busy = 0
    try:
        with open(root / "proc/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break  # the per-core lines come first
                name, *fields = line.split()
                if name == "cpu" or int(name[3:]) not in cpus:
                    continue
                ticks = [int(v) for v in fields[:8]]
                busy += sum(ticks) - ticks[3] - ticks[4]  # less idle and iowait
    except (OSError, ValueError):
        return 0.0
    return busy / os.sysconf("SC_CLK_TCK")


def child_pids(root: Path = Path("/"), pid: int | None = None) -> set[int]:
    """PIDs of the children of `pid` (this process by default), from every thread's children
    file (a DataLoader forks from whichever thread iterates it); none when it is gone."""
    pid = os.getpid() if pid is None else pid
    pids: set[int] = set()
    try:
        tasks = os.listdir(root / f"proc/{pid}/task")
    except OSError:
        return pids
    for tid in tasks:
        text = _proc_file(root, pid, f"task/{tid}/children")
        if text is not None:
            pids.update(int(child) for child in text.split())
    return pids


def process_tree(
    pid: int, root: Path = Path("/"), leave_out: frozenset[int] = frozenset()
) -> list[int]:
    """`pid` and all its descendants (`child_pids`, level by level: grandchildren included),
    less the processes in `leave_out` with their own descendants; processes that end while it
    reads are skipped. Reading the tree's own children files, not every process's stat, keeps
    a reading cheap enough for the training thread (about 0.6 ms with eight workers)."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += sorted(child_pids(root, current) - leave_out)
    return tree


def helper_processes(pid: int, root: Path = Path("/")) -> frozenset[int]:
    """The children of `pid` running another program than `pid` does: a server or a tool it
    started (the demo's SeaweedFS in a notebook's kernel), not a DataLoader worker, which runs
    the same interpreter however it is started (fork, spawn or forkserver). A child whose
    program cannot be read is not counted as a helper."""
    try:
        own = os.readlink(root / f"proc/{pid}/exe")
    except OSError:
        return frozenset()
    helpers = set()
    for child in child_pids(root, pid):
        try:
            if os.readlink(root / f"proc/{child}/exe") != own:
                helpers.add(child)
        except OSError:
            continue
    return frozenset(helpers)


def rss_bytes(pid: int | str = "self", root: Path = Path("/")) -> int:
    """The resident set of a live process in bytes (/proc/PID/statm); 0 when it is gone."""
    return _rss_bytes(pid, root) or 0


def _rss_bytes(pid: int | str, root: Path) -> int | None:
    """statm's resident pages, the count VmRSS shows in kB, in bytes; None when unreadable.
    (Not /proc/PID/stat's rss field, which can lag VmRSS by some pages.)"""
    text = _proc_file(root, pid, "statm")
    if text is None:
        return None
    try:
        return int(text.split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, IndexError):
        return None


def _proc_file(root: Path, pid: int | str, name: str) -> bytes | None:
    """proc/PID/NAME under `root` as bytes (one read: the short files read here), None when
    unreadable (the process is gone). os.open and os.read, not Path.read_text, which costs
    twice as much: these readers run on the training thread of every measuring loop
    (`TreeMeter`)."""
    try:
        fd = os.open(f"{root}/proc/{pid}/{name}", os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def peak_rss_bytes(pid: int | str = "self", root: Path = Path("/")) -> int:
    """A live process's peak resident set in bytes (VmHWM), 0 when unknown. Not ru_maxrss: Linux
    carries the pre-exec image's peak across fork + exec, so a child would report at least its
    parent's; VmHWM belongs to the exec'd image alone."""
    text = _read(root / f"proc/{pid}/status") or ""
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            try:
                return int(line.split()[1]) * 1024
            except (ValueError, IndexError):
                return 0
    return 0


def cpu_model(root: Path = Path("/")) -> str:
    """The CPU's model name (the first "model name" line of /proc/cpuinfo, as a benchmark's run
    record names its machine); "" where /proc/cpuinfo has none (some ARM kernels) or is absent."""
    for line in (_read(root / "proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def cpu_seconds(pid: int | str = "self", root: Path = Path("/")) -> float:
    """User plus system CPU seconds a live process has used (/proc/PID/stat utime and stime),
    all its threads; 0 when it is gone."""
    return _cpu_seconds(pid, root) or 0.0


def _cpu_seconds(pid: int | str, root: Path) -> float | None:
    text = _proc_file(root, pid, "stat")
    if text is None:
        return None
    try:
        # the command name may hold spaces and parentheses: fields follow the last ")"
        fields = text.rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError):
        return None


def process_usage(pid: int, root: Path = Path("/")) -> tuple[float, int] | None:
    """(CPU seconds so far, resident bytes now) of a process, as `cpu_seconds` and `rss_bytes`
    read them; None when it is gone, where those two would read 0 (a process that ended is
    told apart from one that has not yet used a clock tick: `TreeSample` keeps the CPU an
    ended one was last seen with). A zombie's memory is gone: its resident set reads 0."""
    cpu = _cpu_seconds(pid, root)
    return None if cpu is None else (cpu, _rss_bytes(pid, root) or 0)

"""Hardware probe against recorded/fake NVML answers and a recorded /proc + /sys tree."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from advisor.measure.hardware import GPU_CATALOG, HardwareProfile, probe_hardware
from advisor.measure.hardware.host import (
    busy_cpu_s,
    cgroup_cpu_limit,
    cgroup_memory_limit,
    cpu_model,
    disk_kind,
    meminfo,
    peak_rss_bytes,
    probe_disk,
    process_tree,
    quota_group_cpu_s,
    rss_bytes,
)

NOT_SUPPORTED = 3
INVALID_ARGUMENT = 2
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
GIB = 1 << 30


class NVMLError(Exception):
    """Same contract as pynvml.NVMLError: carries the NVML return code in `.value`."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {
            NOT_SUPPORTED: "Not Supported",
            DRIVER_NOT_LOADED: "Driver Not Loaded",
            LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        }.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class FakeGpu:
    name: str | bytes
    memory: int
    pcie: tuple[int, int, int, int] | None  # gen cur, gen max, width cur, width max
    nvlinks: int | None  # active links; None = NotSupported
    max_links: int = 12


@dataclass
class FakeNvml:
    """A module-like object answering like pynvml for a list of GPUs."""

    gpus: list[FakeGpu] = field(default_factory=list)
    init_error: int | None = None
    driver: str | bytes = "535.129.03"
    cuda: int = 12020
    calls: list[str] = field(default_factory=list)
    NVML_ERROR_NOT_SUPPORTED: int = NOT_SUPPORTED
    NVML_FEATURE_ENABLED: int = 1
    NVML_NVLINK_MAX_LINKS: int = 18
    NVMLError: type = NVMLError

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: FakeGpu) -> str | bytes:
        return h.name

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        return types.SimpleNamespace(total=h.memory, free=h.memory, used=0)

    def _pcie(self, h: FakeGpu, i: int) -> int:
        if h.pcie is None:
            raise self.NVMLError(NOT_SUPPORTED)
        return h.pcie[i]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._pcie(h, 0)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._pcie(h, 1)

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._pcie(h, 2)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._pcie(h, 3)

    def nvmlDeviceGetNvLinkState(self, h: FakeGpu, link: int) -> int:
        if h.nvlinks is None:
            raise self.NVMLError(NOT_SUPPORTED)
        if link >= h.max_links:
            raise self.NVMLError(INVALID_ARGUMENT)
        return 1 if link < h.nvlinks else 0

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda


A100 = FakeGpu(b"NVIDIA A100-SXM4-80GB", 80 * GIB, (4, 4, 16, 16), nvlinks=12)
L4_IDLE = FakeGpu("NVIDIA L4", 24 * GIB, (1, 4, 16, 16), nvlinks=None)
CONSUMER = FakeGpu("NVIDIA GeForce GTX 1080", 8 * GIB, None, nvlinks=None)


def test_mixed_gpus() -> None:
    nvml = FakeNvml(gpus=[A100] * 8 + [L4_IDLE, CONSUMER], driver=b"535.129.03")
    hw = probe_hardware(nvml=nvml)
    assert hw.gpu_count == 10 and hw.has_gpu and not hw.planned
    a100 = hw.gpus[0]
    assert a100.name == "NVIDIA A100-SXM4-80GB"  # bytes decoded
    assert a100.memory_total_bytes == 80 * GIB
    assert (a100.pcie_gen_max, a100.pcie_width_max, a100.nvlink_active_links) == (4, 16, 12)
    assert a100.driver_version == "535.129.03" and a100.cuda_version == "12.2"
    assert [g.index for g in hw.gpus] == list(range(10))
    l4 = hw.gpus[8]
    assert (l4.pcie_gen_current, l4.pcie_gen_max) == (1, 4)  # idle link runs at gen1
    assert l4.nvlink_active_links is None
    assert l4.pcie_max_gb_s == pytest.approx(1.969 * 16)
    consumer = hw.gpus[9]
    assert consumer.pcie_gen_current is None and consumer.pcie_width_max is None
    assert consumer.pcie_max_gb_s is None
    assert consumer.memory_total_bytes == 8 * GIB
    assert nvml.calls == ["init", "shutdown"]
    assert not [n for n in hw.notes if "GPU" in n]  # NotSupported is not worth a note


def test_real_pynvml_error_classes() -> None:
    """The same answers raised as pynvml's own NVMLError subclasses (NVMLError_NotSupported...)."""
    import pynvml

    nvml = FakeNvml(gpus=[A100, L4_IDLE, CONSUMER], NVMLError=pynvml.NVMLError)
    hw = probe_hardware(nvml=nvml)
    assert [g.nvlink_active_links for g in hw.gpus] == [12, None, None]
    assert hw.gpus[2].pcie_gen_max is None and not hw.notes
    down = probe_hardware(nvml=FakeNvml(init_error=DRIVER_NOT_LOADED, NVMLError=pynvml.NVMLError))
    assert down.gpus == () and any("Driver Not Loaded" in n for n in down.notes)


def _modules_containing(text: str) -> set[str]:
    package = Path(__file__).resolve().parents[2] / "advisor"
    return {
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if text in p.read_text(encoding="utf-8")
    }


def test_only_nvml_imports_pynvml() -> None:
    assert _modules_containing("import pynvml") == {"measure/hardware/nvml.py"}


def test_only_the_hardware_package_reads_proc() -> None:
    """The machine is read in one place, the hardware package: its cores, memory and processes
    (host), and which of its processes serve a loopback endpoint (local_server); the demo, a
    leaf library that may not import the measurements, reads only which process listens on
    the ports it picked."""
    assert _modules_containing('"proc/') == {
        "measure/hardware/host.py",
        "measure/hardware/local_server.py",
    }
    assert _modules_containing('"/proc') == {"demo/ports.py"}


def test_profile_is_hostname_free() -> None:
    import socket

    text = json.dumps(probe_hardware(nvml=FakeNvml(gpus=[A100])).to_dict())
    assert socket.gethostname() not in text


@pytest.mark.parametrize("code", [LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED])
def test_no_driver_is_a_normal_answer(code: int) -> None:
    hw = probe_hardware(nvml=FakeNvml(init_error=code))
    assert hw.gpus == ()
    assert any("NVML could not start" in n for n in hw.notes)


def test_no_gpu() -> None:
    hw = probe_hardware(nvml=FakeNvml(gpus=[]))
    assert hw.gpus == () and any("no GPU" in n for n in hw.notes)


def test_pynvml_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    hw = probe_hardware()
    assert hw.gpus == ()
    command = "pip install 'loader-advisor[gpu]'"
    assert f"no GPU probe available: nvidia-ml-py is not installed ({command})" in hw.notes


def test_unexpected_error_becomes_note() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
            raise NVMLError(999)

    hw = probe_hardware(nvml=Broken(gpus=[L4_IDLE]))
    assert hw.gpus[0].memory_total_bytes is None
    assert any("memory" in n for n in hw.notes)


def test_real_pynvml_without_gpu_never_raises() -> None:
    hw = probe_hardware()  # this machine: no GPU / no driver
    assert isinstance(hw, HardwareProfile)
    assert hw.usable_cores >= 1
    json.dumps(hw.to_dict())


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_cgroup_v2_and_meminfo(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sys/fs/cgroup/cpu.max": "150000 100000\n",
            "sys/fs/cgroup/memory.max": "4294967296\n",
            "proc/meminfo": "MemTotal:       16384000 kB\nMemFree: 1000 kB\n"
            "MemAvailable:    8192000 kB\n",
        },
    )
    assert cgroup_cpu_limit(root) == 1.5
    assert cgroup_memory_limit(root) == 4 * GIB
    assert meminfo(root) == (16384000 * 1024, 8192000 * 1024)
    hw = probe_hardware(nvml=FakeNvml(), root=root)
    # 1.5 cores of CPU time, as the quota gives them: two processes can share them
    assert hw.usable_cores == 1.5
    assert hw.ram_total_bytes == 4 * GIB and hw.ram_available_bytes == 4 * GIB


def test_a_quota_counts_its_own_groups_cpu_not_the_machines(tmp_path: Path) -> None:
    """Under a CPU quota the busy CPU is the quota group's own (what the process may use): a
    1-core pod on a 96-core node would otherwise count the node's other work as its own loading
    (issue 56's cross-size bench: 8.5 ms a sample "busy" for 3.7 ms of a worker's)."""
    v2 = _tree(
        tmp_path / "v2",
        {
            "proc/self/cgroup": "0::/pod\n",
            "sys/fs/cgroup/pod/cpu.max": "150000 100000\n",
            "sys/fs/cgroup/pod/cpu.stat": "usage_usec 2500000\nuser_usec 2000000\n",
            "proc/stat": "cpu  900 0 900 100 0 0 0 0\ncpu0 450 0 450 50 0 0 0 0\n",
        },
    )
    assert quota_group_cpu_s(v2) == 2.5
    assert busy_cpu_s(frozenset({0}), v2) == 2.5
    v1 = _tree(
        tmp_path / "v1",
        {
            "proc/self/cgroup": "4:cpu,cpuacct:/pod\n",
            "sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_quota_us": "50000\n",
            "sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/cpu,cpuacct/pod/cpuacct.usage": "1250000000\n",
        },
    )
    assert quota_group_cpu_s(v1) == 1.25
    unlimited = _tree(
        tmp_path / "none",
        {"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "max 100000\n"},
    )
    assert quota_group_cpu_s(unlimited) is None


@pytest.mark.timing
def test_a_real_quota_group_reads_its_own_cpu() -> None:
    """A process in a cgroup of half a core, spinning for 1 s, used half a second of CPU: the
    group's reading says so, whatever else the machine's cores did meanwhile."""
    group = Path("/sys/fs/cgroup/cpu") / f"la-test-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpu.cfs_quota_us").write_text("50000")
    except OSError as exc:
        pytest.skip(f"no writable cgroup v1 cpu controller here: {exc}")
    try:
        code = (
            "import os, sys, time\n"
            f"open('{group}/cgroup.procs', 'w').write(str(os.getpid()))\n"
            "from advisor.measure.hardware.host import quota_group_cpu_s\n"
            "start = quota_group_cpu_s(); t = time.monotonic()\n"
            "while time.monotonic() - t < 1.0: pass\n"
            "print(quota_group_cpu_s() - start)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
        assert 0.35 <= float(out.stdout) <= 0.65  # half of the 1 s spun, as the quota allows
    finally:
        group.rmdir()


def test_cgroup_of_this_process_wins(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
            "sys/fs/cgroup/cpu.max": "max 100000\n",
            "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "400000 100000\n",
            "sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "8589934592\n",
        },
    )
    assert cgroup_cpu_limit(root) == 4.0
    assert cgroup_memory_limit(root) == 8 * GIB
    v1 = _tree(
        tmp_path / "v1",
        {
            "proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000\n",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
        },
    )
    assert cgroup_cpu_limit(v1) == 2.0
    assert cgroup_memory_limit(v1) == GIB


def test_cgroup_v1_and_unlimited(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        },
    )
    assert cgroup_cpu_limit(root) is None
    assert cgroup_memory_limit(root) is None
    assert cgroup_cpu_limit(_tree(tmp_path / "v2", {"sys/fs/cgroup/cpu.max": "max 100000"})) is None


@pytest.mark.parametrize(
    ("device", "files", "kind"),
    [
        ("nvme0n1p1", {"block/nvme0n1/nvme0n1p1/partition": "1"}, "nvme"),
        ("sda1", {"block/sda/sda1/partition": "1", "block/sda/queue/rotational": "0\n"}, "ssd"),
        ("sdb", {"block/sdb/queue/rotational": "1\n"}, "hdd"),
        ("dm-0", {}, "unknown"),
        ("vda1", {"block/vda/vda1/partition": "1", "block/vda/queue/rotational": "1\n"}, "unknown"),
    ],
)
def test_disk_kind(tmp_path: Path, device: str, files: dict[str, str], kind: str) -> None:
    _tree(tmp_path, files)
    assert disk_kind(device, tmp_path)[0] == kind


def test_probe_disk_uses_mounts(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "proc/mounts": f"/dev/nvme1n1 {tmp_path} xfs rw 0 0\n/dev/sda1 / ext4 rw 0 0\n",
            "sys/block/nvme1n1/device/model": "Amazon EC2 NVMe Instance Storage\n",
        },
    )
    disk = probe_disk(str(tmp_path), root)
    assert disk is not None
    assert (disk.kind, disk.device, disk.filesystem) == ("nvme", "nvme1n1", "xfs")
    assert disk.model == "Amazon EC2 NVMe Instance Storage"
    assert disk.free_bytes > 0 and not disk.is_network_fs


def test_with_target_gpu_is_marked_planned() -> None:
    hw = probe_hardware(nvml=FakeNvml(init_error=LIBRARY_NOT_FOUND))
    planned = hw.with_target_gpu("h100 sxm", 8)
    assert planned.planned and planned.target_gpu == "H100-SXM"
    assert planned.gpu_count == 8 and planned.gpus[0].pcie_gen_max == 5
    assert planned.gpus[0].memory_total_bytes == 80 * GIB
    assert any("planned" in n for n in planned.notes)
    assert planned.usable_cores == hw.usable_cores
    assert hw.with_target_gpu("NVIDIA A100").target_gpu == "A100-40GB"
    with pytest.raises(ValueError, match="unknown GPU"):
        hw.with_target_gpu("Voodoo2")
    with pytest.raises(ValueError, match="count"):
        hw.with_target_gpu("T4", 0)


def test_catalog_covers_common_gpus() -> None:
    for name in ("T4", "L4", "A10G", "V100-16GB", "A100-80GB", "H100-PCIe", "H200", "B200"):
        spec = GPU_CATALOG[name]
        assert spec.memory_total_bytes > 8 * GIB and spec.pcie_gen in (3, 4, 5)


def test_json_round_trip() -> None:
    hw = probe_hardware(nvml=FakeNvml(gpus=[A100, CONSUMER])).with_target_gpu("L4", 2)
    data = json.loads(json.dumps(hw.to_dict()))
    assert HardwareProfile.from_dict(data) == hw


def test_process_tree_follows_every_threads_children_to_grandchildren(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    # pid 1 has two threads, the second forked 2 and 5; 2 forked 3; 4 is no descendant of 1
    tasks = {1: {1: "", 11: "2 5"}, 2: {2: "3"}, 3: {3: ""}, 4: {4: ""}, 5: {5: ""}}
    for pid, threads in tasks.items():
        for tid, children in threads.items():
            (proc / str(pid) / "task" / str(tid)).mkdir(parents=True)
            (proc / str(pid) / "task" / str(tid) / "children").write_text(children)
    assert sorted(process_tree(1, root=tmp_path)) == [1, 2, 3, 5]
    assert process_tree(4, root=tmp_path) == [4]
    assert sorted(process_tree(1, root=tmp_path, leave_out=frozenset({2}))) == [1, 5]
    assert process_tree(99, root=tmp_path) == [99]  # gone: itself, with no children


def test_rss_readers_read_statm_and_vmhwm(tmp_path: Path) -> None:
    status = tmp_path / "proc" / "7"
    status.mkdir(parents=True)
    (status / "statm").write_text("1000 250 10 1 0 100 0\n")
    (status / "status").write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n")
    assert rss_bytes(7, root=tmp_path) == 250 * os.sysconf("SC_PAGE_SIZE")
    assert peak_rss_bytes(7, root=tmp_path) == 2048 * 1024
    assert rss_bytes(8, root=tmp_path) == 0 and peak_rss_bytes(8, root=tmp_path) == 0


def test_cpu_model_reads_the_first_model_name_of_cpuinfo(tmp_path: Path) -> None:
    assert cpu_model(root=tmp_path) == ""  # no /proc/cpuinfo
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")
    assert cpu_model(root=tmp_path) == ""  # an ARM kernel's cpuinfo: no model name
    (tmp_path / "proc" / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC 7R13: 48-Core\nprocessor\t: 1\n"
        "model name\t: other\n"
    )
    assert cpu_model(root=tmp_path) == "AMD EPYC 7R13: 48-Core"


def test_process_tree_of_this_process_sees_a_grandchild() -> None:
    code = (
        "import subprocess, time; p = subprocess.Popen(['sleep', '30']); "
        "print(p.pid, flush=True); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    with child:
        try:
            assert child.stdout is not None
            grandchild = int(child.stdout.readline())
            tree = process_tree(os.getpid())
            assert {child.pid, grandchild} <= set(tree)
            assert rss_bytes(child.pid) > 0
            assert peak_rss_bytes(child.pid) >= rss_bytes(child.pid)
        finally:
            for pid in reversed(process_tree(child.pid)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_shm_free_bytes_beside_its_size(tmp_path: Path) -> None:
    """/dev/shm's free bytes (what batches in flight may take) beside its size; a profile
    recorded before they were reads back without them."""
    hw = probe_hardware(nvml=FakeNvml(), shm_path=str(tmp_path))
    st = os.statvfs(tmp_path)
    assert hw.shm_bytes == st.f_blocks * st.f_frsize
    assert hw.shm_free_bytes == pytest.approx(st.f_bavail * st.f_frsize, rel=0.01)
    assert HardwareProfile.from_dict(hw.to_dict()) == hw
    older = {k: v for k, v in hw.to_dict().items() if k != "shm_free_bytes"}
    assert HardwareProfile.from_dict(older).shm_free_bytes is None
    missing = probe_hardware(nvml=FakeNvml(), shm_path=str(tmp_path / "none"))
    assert missing.shm_bytes is None and missing.shm_free_bytes is None
    with pytest.raises(ValueError, match="shm_free_bytes"):
        HardwareProfile(shm_free_bytes=-1)

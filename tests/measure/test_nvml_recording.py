"""Recording the probe's NVML answers and replaying them: the replay must probe identically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from advisor.measure.hardware import probe_hardware
from advisor.measure.hardware.nvml import NOT_SUPPORTED_REASON
from advisor.measure.hardware.recording import RecordingNvml, write_recording
from tests.measure.nvml_replay import NotRecorded, ReplayNvml
from tests.measure.test_hardware import A100, CONSUMER, L4_IDLE, FakeNvml


def _record(fake: FakeNvml, tmp_path: Path) -> tuple[object, dict]:  # type: ignore[type-arg]
    recorder = RecordingNvml(fake)
    probed = probe_hardware(nvml=recorder)
    write_recording(recorder, tmp_path / "nvml.json", "fake mixed GPUs")
    return probed, json.loads((tmp_path / "nvml.json").read_text())


def test_replay_probes_exactly_as_the_recorded_machine(tmp_path: Path) -> None:
    probed, recording = _record(FakeNvml(gpus=[A100, L4_IDLE, CONSUMER]), tmp_path)
    replayed = probe_hardware(nvml=ReplayNvml(recording))
    assert replayed.gpus == probed.gpus  # type: ignore[attr-defined]
    assert replayed.notes == probed.notes  # type: ignore[attr-defined]
    assert recording["source"] == "fake mixed GPUs"
    handles = {e["result"] for e in recording["calls"] if e["fn"] == "nvmlDeviceGetHandleByIndex"}
    assert handles == {"gpu:0", "gpu:1", "gpu:2"}  # handles recorded as tokens, not pointers


def test_replay_of_an_incomplete_recording_is_visible(tmp_path: Path) -> None:
    _, recording = _record(FakeNvml(gpus=[A100]), tmp_path)
    recording["calls"] = [c for c in recording["calls"] if c["fn"] != "nvmlDeviceGetMemoryInfo"]
    replayed = probe_hardware(nvml=ReplayNvml(recording))
    assert replayed.gpus[0].memory_total_bytes is None
    assert any(NotRecorded.__name__ in note for note in replayed.notes)


def test_every_none_field_says_why() -> None:
    hw = probe_hardware(nvml=FakeNvml(gpus=[A100, CONSUMER]))
    a100, consumer = hw.gpus
    assert a100.null_reasons == {}
    missing = {
        name
        for name in ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max")
        if getattr(consumer, name) is None
    } | {"nvlink_active_links"}
    assert set(consumer.null_reasons) == missing
    assert set(consumer.null_reasons.values()) == {NOT_SUPPORTED_REASON}


def test_a_missing_nvml_function_is_the_reason() -> None:
    class Old(FakeNvml):
        nvmlSystemGetCudaDriverVersion = None  # type: ignore[assignment]

    gpu = probe_hardware(nvml=Old(gpus=[A100])).gpus[0]
    assert gpu.cuda_driver_version is None
    assert "nvmlSystemGetCudaDriverVersion" in gpu.null_reasons["cuda_driver_version"]


def test_cli_records_this_machine(tmp_path: Path) -> None:
    """`hardware --record-nvml` on this machine (no GPU here): the recording holds nvmlInit."""
    path = tmp_path / "rec.json"
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "hardware", "--json", "--record-nvml", str(path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    recording = json.loads(path.read_text())
    assert recording["calls"][0]["fn"] == "nvmlInit"
    gpus = json.loads(done.stdout)["hardware"]["gpus"]
    replayed = probe_hardware(nvml=ReplayNvml(recording))
    assert len(replayed.gpus) == len(gpus)


def test_the_h100_recording_replays_every_field_the_probe_promises() -> None:
    """Recorded on the lent GPU machine with `python -m advisor hardware --json --record-nvml`
    (one NVIDIA H100 80GB HBM3 in a VM, driver 580.159.04): every field is filled, or None with
    the reason NVML gave (its NVLink state is not supported there)."""
    recording = json.loads((Path(__file__).parent / "recordings" / "nvml_h100.json").read_text())
    hardware = probe_hardware(nvml=ReplayNvml(recording))
    (gpu,) = hardware.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_bytes == 85_520_809_984
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max) == (5, 5)
    assert (gpu.pcie_width_current, gpu.pcie_width_max) == (16, 16)
    assert gpu.pcie_max_gb_s is not None and gpu.pcie_max_gb_s > 60  # gen5 x16
    assert (gpu.driver_version, gpu.cuda_version) == ("580.159.04", "13.0")
    assert gpu.nvlink_active_links is None
    assert gpu.null_reasons == {"nvlink_active_links": NOT_SUPPORTED_REASON}
    assert not any(NotRecorded.__name__ in note for note in hardware.notes)
    assert hardware.has_gpu

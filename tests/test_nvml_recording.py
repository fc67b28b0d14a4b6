"""Recording the probe's NVML answers and replaying them: the replay must probe identically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nvml_replay import NotRecorded, ReplayNvml
from test_hardware import A100, CONSUMER, L4_IDLE, FakeNvml

from advisor.measure.hardware import probe_hardware
from advisor.measure.hardware.nvml import NOT_SUPPORTED_REASON
from advisor.measure.hardware.recording import RecordingNvml, write_recording


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

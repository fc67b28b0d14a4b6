"""Advice only where it gains (advisor/decide/facts/gain.py, DEC-1, MEAS-4): a preprocessing or
placement change is offered only where its predicted rate clears the noise the trial measured
at the chosen count; no GPU decode without a GPU here or planned; a figure recorded on another
GPU is a prediction, named as such."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.core.workload import Workload
from advisor.decide.recommend import Recommendation, recommend
from advisor.measure.hardware import gpu_decode_recorded as recorded
from advisor.report.headline import headline_lines
from advisor.report.recommendation import decision_value
from tests.builders import make_hardware, make_profile, make_trial

# 7.5 GB of 150 KB JPEGs on S3, streamed (no local disk to copy to), on 2 cores: one worker
# decodes about 250 a second (4 ms of CPU each); a decoded image is 1.5 MB
JPEG = {"fmt": "jpeg", "spo": None, "size": 150_000, "count": 50_000}


def _rec(consumer: float, slices: tuple[float, float, float], **hardware: Any) -> Recommendation:
    low, median, high = slices
    rates = {0: 200.0, 1: slices, 2: (low - 5, median - 3, high - 10)}
    return recommend(
        make_profile(**JPEG),
        make_hardware(**{"cores": 2, "gpus": 0, "disk_free": 0, **hardware}),
        Workload(consumer_rate=consumer),
        make_trial(rates=rates, output_bytes=1.5e6),
    )


def test_no_change_is_offered_where_none_gains_beyond_the_noise() -> None:
    """249 samples/s measured (slices 230-290) for a 290/s consumer: stored pixels would reach
    the consumer's 290, which the slices already touched: no gain beyond the noise. The advice
    said "preprocess-offline (measured)" beside "decode on the GPU" on a machine with none."""
    rec = _rec(290.0, (230.0, 249.0, 290.0))
    preprocess = rec.decision("preprocess")
    assert rec.input_bound and preprocess.rules == ("DEC-1",)
    assert preprocess.value == "cpu" and "no other place gains" in preprocess.rationale
    assert preprocess.evidence["a_gain_exceeds_samples_per_s"] == 290.0
    assert decision_value(preprocess) == "decode on the CPU, as now (no change)"  # the card
    said = " ".join(headline_lines(rec, None, 290.0))
    assert "offline" not in said and "GPU" not in said, said
    # the same data with a consumer the stored pixels would serve beyond the noise: offered
    faster = _rec(400.0, (245.0, 249.0, 252.0))
    offered = faster.decision("preprocess")
    assert offered.value == "pre-decoded" and offered.measured is False  # the model's rate
    assert offered.evidence["placement_samples_per_s"]["pre-decoded"] > 1.05 * 249.0


def test_a_tar_set_whose_loader_without_decode_reads_within_the_noise_gets_no_offline_advice() -> (
    None
):
    """MEAS-4 on 150 MB tar shards: 8 workers read 1,880 samples/s (slices 1,790-2,000) for a
    2,000/s consumer; without the decode they would read the consumer's 2,000, which a slice
    already reached."""
    case = {"rates": {0: 230.0, 1: 250.0, 2: 480.0, 4: 950.0, 8: (1790.0, 1880.0, 2000.0)}}
    rec = recommend(make_profile(), make_hardware(), Workload(consumer_rate=2000.0),
                    make_trial(**case))  # fmt: skip
    assert rec.num_workers == 8 and rec.input_bound
    assert "MEAS-4" not in rec.fired_rules
    wider = recommend(make_profile(), make_hardware(), Workload(consumer_rate=5000.0),
                      make_trial(**case))  # fmt: skip
    assert "MEAS-4" in wider.fired_rules  # 5,000/s without the decode: a gain


def test_no_gpu_decode_without_a_gpu_here_or_planned() -> None:
    """A 100,000/s consumer: the H100's recorded decode (~9,000/s) would beat the CPU's, but
    this machine has no GPU and none is planned: the GPU is not weighed."""
    rec = _rec(1e5, (245.0, 249.0, 252.0))
    preprocess = rec.decision("preprocess")
    assert preprocess.value != "gpu"
    assert "gpu" not in preprocess.evidence["placement_samples_per_s"]
    assert preprocess.evidence["gpu_figures"] is None
    assert "training has no GPU here or planned (--target-gpu)" in preprocess.rationale


def test_a_recorded_gpu_figure_is_a_prediction_named_with_its_device() -> None:
    """With a GPU (here without its decode measured, or a target's), the recorded figures are
    weighed, said to be "predicted from the figures recorded on" the H100, never measured."""
    for hardware in ({"gpus": 1}, {"target": {"cores": 2, "gpus": 1, "gpu": "A100-80GB"}}):
        rec = _rec(1e5, (245.0, 249.0, 252.0), **hardware)
        preprocess = rec.decision("preprocess")
        assert preprocess.value == "gpu", hardware
        assert preprocess.measured is False
        assert f"predicted from the figures recorded on {recorded.DEVICE}" in (preprocess.rationale)
        assert "not measured here" in preprocess.rationale


def test_stored_pixels_and_gpu_decodes_are_still_taken_by_the_training_thread() -> None:
    """A 96-core node's 8 ranks whose loaders would deliver the 2,500 samples/s the GPU takes,
    but whose training thread takes each batch (130 µs a sample, measured) then steps: 1,887
    at most. Stored decoded, the same tensors are taken the same way; decoded on the GPU, the
    JPEG's bytes are, and the decode adds its time. DEC-1 offered stored pixels at the
    consumer's 2,500, then the GPU at 1 / (400 µs + its time) without the take."""
    import dataclasses

    from advisor.measure.trial.probe_results import HandoverCost

    trial = make_trial(rates={0: 200.0, 1: 300.0, 2: 390.0}, output_bytes=0.6e6)
    taken = HandoverCost(64, 32, 0.6e6, worker_s_per_sample=300e-6, main_s_per_sample=130e-6)
    node = {"cores": 96.0, "gpus": 8, "local_disk_bytes": 8 * 10**12, "local_disks": 8}
    rec = recommend(
        make_profile(**JPEG),
        make_hardware(cores=2, gpus=0, target=node),
        Workload(consumer_rate=2500.0, gpus_per_node=8),
        dataclasses.replace(trial, handover=taken),
    )
    preprocess = rec.decision("preprocess")
    rates = preprocess.evidence["placement_samples_per_s"]
    assert rates["pre-decoded"] == rates["cpu"] == pytest.approx(1 / (1 / 2500 + 130e-6), 0.02)
    on_gpu = preprocess.evidence["gpu_s_per_image"]
    assert rates["gpu"] == pytest.approx(1 / (1 / 2500 + on_gpu + 130e-6), 0.01)
    assert preprocess.value == "cpu", preprocess.rationale

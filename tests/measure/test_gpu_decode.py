"""Where the JPEG decode runs (DEC-1): the GPU decode figures, measured or recorded, and the
rule's arithmetic on them. The figures were recorded on a real GPU by `python -m bench gpu
--record`; this machine has none, so the measuring itself runs there only."""

from __future__ import annotations

import pytest

from advisor.decide.rules.placement import weigh
from advisor.decide.rules.registry import evaluate
from advisor.measure.hardware import gpu_decode_recorded as recorded
from advisor.measure.hardware.gpu_decode import (
    GpuDecode,
    GpuDecodePoint,
    gpu_decode_unavailable,
    measure_gpu_decode,
    recorded_gpu_decode,
)
from tests.builders import make_ctx

JPEG = {"fmt": "jpeg", "spo": None, "size": 150_000, "count": 50_000}


def _point(pixels: float, per_s: float) -> GpuDecodePoint:
    return GpuDecodePoint(pixels, 1e5, per_s, per_s, per_s, 64e3 / per_s, 1e-4)


def test_seconds_per_image_is_the_line_through_the_measured_sizes() -> None:
    gpu = GpuDecode("gpu", 64, (_point(1e6, 5_000.0), _point(2e5, 10_000.0)))
    assert gpu.seconds_per_image(2e5) == pytest.approx(1e-4)
    assert gpu.seconds_per_image(1e6) == pytest.approx(2e-4)
    assert gpu.seconds_per_image(6e5) == pytest.approx(1.5e-4)  # halfway
    assert gpu.seconds_per_image(2e6) == pytest.approx(3.25e-4)  # the line, beyond
    assert gpu.seconds_per_image(0) == pytest.approx(0.75e-4)  # the fixed part per image
    one = GpuDecode("gpu", 64, (_point(2e5, 10_000.0),))
    assert one.seconds_per_image(4e5) == pytest.approx(2e-4)  # one size: in proportion above
    assert one.seconds_per_image(1e5) == pytest.approx(1e-4)  # ... never below it


def test_the_recorded_figures_name_their_device_and_command() -> None:
    gpu = recorded_gpu_decode()
    assert gpu is not None and gpu.recorded is not None
    assert recorded.DEVICE in gpu.recorded and recorded.COMMAND in gpu.recorded
    assert [p.mean_pixels for p in gpu.points] == sorted(p["mean_pixels"] for p in recorded.POINTS)
    # batched nvJPEG decodes thousands of images a second, each far under a CPU core's decode
    assert all(p.images_per_s > 1_000 for p in gpu.points)
    assert all(p.images_per_s_low <= p.images_per_s <= p.images_per_s_high for p in gpu.points)


def test_without_a_cuda_device_nothing_is_measured_and_it_says_why() -> None:
    why = gpu_decode_unavailable()
    assert why is not None  # this machine has no GPU
    with pytest.raises(RuntimeError, match=why):
        measure_gpu_decode([b"\xff\xd8"], 64)


def _dec1(case: dict) -> tuple[object, dict]:  # type: ignore[type-arg]
    evaluation = evaluate(make_ctx(case))
    finding = next(f for f in evaluation.fired if f.rule_id == "DEC-1")
    return finding, evaluation.state


def test_without_a_gpu_here_the_rule_says_it_used_the_recorded_figures() -> None:
    finding, _ = _dec1(
        {"profile": JPEG, "trial": {"output_bytes": 1.5e6}, "workload": {"consumer_rate": 1e5}}
    )
    assert finding.evidence["gpu_figures"] == recorded_gpu_decode().recorded  # type: ignore[attr-defined, union-attr]
    assert f"recorded on {recorded.DEVICE}" in finding.rationale  # type: ignore[attr-defined]


def test_the_gpu_path_costs_the_loop_its_measured_time_per_image() -> None:
    """A GPU measured at 10,000 images/s takes 100 us of the loop per image: for a consumer of
    100,000/s (10 us a sample) the loop runs at 1 / (10 us + 100 us), unless the loader
    without its decode is slower still."""
    case = {
        "profile": JPEG,
        "trial": {"output_bytes": 1.5e6, "gpu_images_per_s": 10_000.0},
        "workload": {"consumer_rate": 1e5},
    }
    finding, state = _dec1(case)
    assert finding.evidence["gpu_figures"] == "measured here"  # type: ignore[attr-defined]
    assert finding.evidence["gpu_s_per_image"] == pytest.approx(1e-4)  # type: ignore[attr-defined]
    ctx = make_ctx(case)
    gpu = ctx.trial.gpu_decode  # type: ignore[union-attr]
    assert gpu is not None
    place = weigh(ctx, state, gpu, 5e5)
    assert place.gpu <= 1 / (1e-5 + 1e-4) + 1e-6
    assert place.inflation == pytest.approx(10.0)  # 1.5 MB of pixels for a 150 KB JPEG
    # a slower GPU moves the choice back to the CPU
    slow = {**case, "trial": {"output_bytes": 1.5e6, "gpu_images_per_s": 300.0}}
    assert _dec1(slow)[0].value != "gpu"  # type: ignore[attr-defined]

"""to_device: every tensor of a batch moved, everything else kept; bench gpu without a GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from native_loader import to_device


def test_moves_every_tensor_of_nested_batches() -> None:
    image = torch.arange(12, dtype=torch.uint8).reshape(2, 2, 3)
    batch = [{"__key__": "a", "jpg": image, "cls": torch.tensor(3)}, (image, "label", 7)]
    moved = to_device(batch, torch.device("meta"))
    assert isinstance(moved, list) and isinstance(moved[1], tuple)
    assert moved[0]["__key__"] == "a" and moved[1][1:] == ("label", 7)
    assert moved[0]["jpg"].device.type == "meta" and moved[1][0].device.type == "meta"
    assert moved[0]["jpg"].shape == image.shape and moved[0]["cls"].dtype == torch.int64


def test_same_device_keeps_values() -> None:
    tensor = torch.randn(4)
    assert torch.equal(to_device([tensor], "cpu")[0], tensor)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the no-GPU answer")
def test_bench_gpu_without_a_gpu_says_skipped() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "gpu", "--quick"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "skipped, no CUDA device" in done.stdout

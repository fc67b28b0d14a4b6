"""JPEG decode on the GPU, measured: batched nvJPEG through `torchvision.io.decode_jpeg`.

What the decode-placement rule (DEC-1) weighs against the CPU decode the trial measures: how
many images a second the GPU decodes, how much of the GPU's time a batch costs (CUDA events),
and the calling thread's CPU per image (the host's part of the decode). The trial measures it
where a CUDA device and torchvision are present; elsewhere the rule takes the figures
`python -m bench gpu` recorded (`RECORDED_GPU_DECODE`, with the device they were recorded on).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.measure.hardware import gpu_decode_recorded as recorded


@dataclass(frozen=True)
class GpuDecodePoint:
    """Batched GPU decode of images of one size: `mean_pixels` per image."""

    mean_pixels: float
    mean_jpeg_bytes: float
    images_per_s: float  # median over the rounds
    images_per_s_low: float
    images_per_s_high: float
    gpu_ms_per_batch: float  # median of CUDA-event time per batch
    host_cpu_s_per_image: float  # the calling thread's CPU per image (the host's part)


@dataclass(frozen=True)
class GpuDecode:
    """GPU decode figures, measured here (`recorded` None) or recorded elsewhere (`recorded`
    says where and when, and by which command)."""

    device: str
    batch_size: int
    points: tuple[GpuDecodePoint, ...]  # by mean_pixels, smallest first
    recorded: str | None = None

    def seconds_per_image(self, pixels: float) -> float:
        """The GPU's wall seconds per image of `pixels`, in batches of `batch_size`: a line
        through the two measured sizes nearest `pixels` (nvJPEG's time grows with the pixels
        it decodes, plus a fixed part per image), never below the smallest measured cost."""
        points = sorted(self.points, key=lambda p: p.mean_pixels)
        if len(points) == 1 or points[0].mean_pixels == points[-1].mean_pixels:
            only = points[0]
            return (1 / only.images_per_s) * max(pixels / only.mean_pixels, 1.0)
        low, high = points[0], points[-1]
        for a, b in itertools.pairwise(points):
            if pixels <= b.mean_pixels:
                low, high = a, b
                break
        t_low, t_high = 1 / low.images_per_s, 1 / high.images_per_s
        slope = (t_high - t_low) / (high.mean_pixels - low.mean_pixels)
        return max(t_low + slope * (pixels - low.mean_pixels), min(t_low, t_high) * 0.5)

    def host_cpu_s_per_image(self, pixels: float) -> float:
        nearest = min(self.points, key=lambda p: abs(p.mean_pixels - pixels))
        return nearest.host_cpu_s_per_image


def recorded_gpu_decode() -> GpuDecode | None:
    """The figures `python -m bench gpu --record` wrote on a real GPU (gpu_decode_recorded.py);
    None where none were recorded."""
    if not recorded.POINTS:
        return None
    return GpuDecode(
        device=recorded.DEVICE,
        batch_size=recorded.BATCH_SIZE,
        points=tuple(GpuDecodePoint(**p) for p in recorded.POINTS),
        recorded=f"recorded on {recorded.DEVICE} ({recorded.DATE}, `{recorded.COMMAND}`)",
    )


def gpu_decode_unavailable() -> str | None:
    """Why the GPU decode cannot be measured here, or None when it can."""
    # torch is imported where a decode is measured: the records above are read by the rules
    # and the wizard, which show before anything imports torch (about 1.5 s)
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        import torchvision.io  # noqa: F401
    except ImportError:
        return "torchvision is not installed"
    return None


def measure_gpu_decode(
    jpegs: Sequence[bytes], batch_size: int, rounds: int = 3, device: str = "cuda"
) -> GpuDecodePoint:
    """Decode `jpegs` on the GPU in batches of `batch_size`, `rounds` times after a warm-up
    batch, and time it: wall-clock images/s per round, CUDA-event ms per batch, and the calling
    thread's CPU per image. Raises RuntimeError where `gpu_decode_unavailable()` says why."""
    why = gpu_decode_unavailable()
    if why is not None:
        raise RuntimeError(f"GPU decode not measured: {why}")
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    if not jpegs:
        raise ValueError("no images to decode")
    tensors = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in jpegs]
    size = max(1, min(batch_size, len(tensors)))
    batches = [tensors[i : i + size] for i in range(0, len(tensors) - size + 1, size)]
    decoded = decode_jpeg(batches[0], mode=ImageReadMode.RGB, device=device)  # warm-up
    torch.cuda.synchronize()
    pixels = statistics.fmean(int(t.shape[-1]) * int(t.shape[-2]) for t in decoded)
    rates: list[float] = []
    batch_ms: list[float] = []
    cpu = 0.0
    images = 0
    for _ in range(max(rounds, 1)):
        wall = time.perf_counter()
        for batch in batches:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            before = time.thread_time()
            start.record()
            decode_jpeg(batch, mode=ImageReadMode.RGB, device=device)
            end.record()
            cpu += time.thread_time() - before
            end.synchronize()
            batch_ms.append(start.elapsed_time(end))
            images += len(batch)
        rates.append(len(batches) * size / (time.perf_counter() - wall))
    return GpuDecodePoint(
        mean_pixels=pixels,
        mean_jpeg_bytes=statistics.fmean(len(b) for b in jpegs),
        images_per_s=statistics.median(rates),
        images_per_s_low=min(rates),
        images_per_s_high=max(rates),
        gpu_ms_per_batch=statistics.median(batch_ms),
        host_cpu_s_per_image=cpu / images,
    )

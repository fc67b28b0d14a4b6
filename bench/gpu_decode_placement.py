"""Decode placement on a real GPU for `python -m bench gpu`: batched nvJPEG decode beside one CPU
thread's decode of the same JPEGs (the demo's and larger ones), and the module of GPU figures that
`--record` writes for DEC-1."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import torch

from advisor.measure.hardware.gpu_decode import GpuDecodePoint, measure_gpu_decode
from native_loader.decoders import decode_image


def cpu_decode_s(jpegs: list[bytes]) -> dict[str, float]:
    """One thread's CPU seconds per image: the default decoder (Pillow) and torchvision's."""
    from torchvision.io import ImageReadMode, decode_jpeg

    started = time.thread_time()
    for data in jpegs:
        decode_image(data)
    pillow = (time.thread_time() - started) / len(jpegs)
    started = time.thread_time()
    for data in jpegs:
        decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=ImageReadMode.RGB)
    return {"pillow_s_per_image": pillow, "torchvision_cpu_s_per_image": (time.thread_time() -
            started) / len(jpegs)}  # fmt: skip


def large_jpegs(count: int, width: int, height: int) -> list[bytes]:
    """`count` photo-like JPEGs of width x height (smooth gradients and noise, quality 90)."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        y, x = np.mgrid[0:height, 0:width]
        base = x[..., None] * rng.uniform(0.1, 0.5, 3) + y[..., None] * rng.uniform(0.1, 0.5, 3)
        pixels = (base + rng.normal(0, 12, (height, width, 3))).clip(0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def decode_placement(small: list[bytes], batch: int, rounds: int) -> dict[str, Any]:
    """GPU and CPU decode of the demo's JPEGs and of 1024x768 ones."""
    sets = {"demo": small, "1024x768": large_jpegs(min(len(small), 256), 1024, 768)}
    rows: dict[str, Any] = {}
    for name, jpegs in sets.items():
        point = measure_gpu_decode(jpegs, batch, rounds)
        cpu = cpu_decode_s(jpegs[:200])
        rows[name] = {"gpu": dataclasses.asdict(point), "cpu": cpu}
        print(
            f"decode {name}: {point.mean_pixels / 1e6:.2f} Mpixel, "
            f"{point.mean_jpeg_bytes / 1e3:.0f} kB: GPU {point.images_per_s:,.0f} images/s "
            f"({point.images_per_s_low:,.0f}-"
            f"{point.images_per_s_high:,.0f}), {point.gpu_ms_per_batch:.2f} GPU ms per batch of "
            f"{batch}, host {point.host_cpu_s_per_image * 1e6:.0f} us CPU per image; CPU one "
            f"thread: Pillow {1 / cpu['pillow_s_per_image']:,.0f}/s, torchvision "
            f"{1 / cpu['torchvision_cpu_s_per_image']:,.0f}/s",
            flush=True,
        )
    return rows


def write_recorded(
    path: Path, device: str, torch_version: str, batch: int, rows: dict[str, Any]
) -> None:
    """The module DEC-1 reads where no GPU is present: the GPU figures of `rows`."""
    points = sorted(
        (GpuDecodePoint(**row["gpu"]) for row in rows.values()), key=lambda p: p.mean_pixels
    )
    lines = [
        '"""GPU JPEG decode figures recorded by `python -m bench gpu --record` on a real GPU.',
        "",
        "DEC-1 uses them where the machine it advises has no CUDA device to measure; the rule",
        "names the device and the date. Written by bench/gpu_decode_placement.py: do not edit "
        'by hand."""',
        "",
        "from __future__ import annotations",
        "",
        f"DEVICE = {json.dumps(device)}",
        f"DATE = {json.dumps(time.strftime('%Y-%m-%d'))}",
        f"COMMAND = {json.dumps('python -m bench gpu --record')}",
        f"TORCH = {json.dumps(torch_version)}",
        f"BATCH_SIZE = {batch}",
        "POINTS: tuple[dict[str, float], ...] = (",
    ]
    for point in points:
        lines.append("    {")
        lines += [f'        "{k}": {round(v, 9)!r},' for k, v in dataclasses.asdict(point).items()]
        lines.append("    },")
    lines += [")", ""]
    path.write_text("\n".join(lines))

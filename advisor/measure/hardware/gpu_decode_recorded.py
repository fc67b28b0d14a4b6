"""GPU JPEG decode figures recorded by `python -m bench gpu --record` on a real GPU.

DEC-1 uses them where the machine it advises has no CUDA device to measure; the rule
names the device and the date. Written by bench/gpu.py: do not edit by hand."""

from __future__ import annotations

DEVICE = "NVIDIA H100 80GB HBM3"
DATE = "2026-11-27"
COMMAND = "python -m bench gpu --record"
TORCH = "2.11.0+cu130"
BATCH_SIZE = 64
POINTS: tuple[dict[str, float], ...] = (
    {
        "mean_pixels": 166868.640625,
        "mean_jpeg_bytes": 126112.255859375,
        "images_per_s": 12989.909884532,
        "images_per_s_low": 9637.887983346,
        "images_per_s_high": 13642.77964281,
        "gpu_ms_per_batch": 4.887072086,
        "host_cpu_s_per_image": 8.4254e-05,
    },
    {
        "mean_pixels": 786432.0,
        "mean_jpeg_bytes": 172168.609375,
        "images_per_s": 8142.199960093,
        "images_per_s_low": 6975.697134413,
        "images_per_s_high": 8312.131715339,
        "gpu_ms_per_batch": 7.71984005,
        "host_cpu_s_per_image": 0.000128282,
    },
)

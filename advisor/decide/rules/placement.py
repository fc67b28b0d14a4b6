"""Where the JPEG decode runs (DEC-1): on the CPU in the loader, on the GPU in the training loop,
or once, offline, into stored pixels. Weighed from the trial's CPU decode and the GPU's batched
decode (measured on this machine's GPU, else the figures recorded on a named one)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.core.model import loading_cores
from advisor.core.units import data_size, duration, per_s, rate, share
from advisor.decide.rules.base import Rule
from advisor.decide.rules.context import Context
from advisor.decide.rules.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.thresholds import NOISE_CAP
from advisor.decide.rules.words import workers
from advisor.measure.hardware.gpu_decode import GpuDecode, recorded_gpu_decode

CHANNELS = 3  # the default decoder's RGB output: bytes per pixel
PLACES = ("cpu", "gpu", "pre-decoded")  # in order of preference where rates are within noise


@dataclass(frozen=True)
class Placement:
    """The rate each place for the decode would deliver to the training loop (samples/s)."""

    cpu: float
    gpu: float
    pre_decoded: float
    gpu_s_per_image: float  # the training loop's time per image decoded on the GPU
    gpu_ms_per_batch: float  # the GPU's own time per batch of the trial's batch size
    inflation: float  # a decoded sample's bytes over the stored JPEG's

    def rates(self) -> dict[str, float]:
        return {"cpu": self.cpu, "gpu": self.gpu, "pre-decoded": self.pre_decoded}

    def choice(self) -> str:
        """The place with the highest rate; a later place in PLACES must beat an earlier one by
        more than the noise (the CPU decode needs no change, the GPU's costs the step)."""
        chosen = PLACES[0]
        for place in PLACES[1:]:
            if self.rates()[place] > self.rates()[chosen] * (1 + NOISE_CAP):
                chosen = place
        return chosen


class DecodePlacement(Rule):
    """Where the JPEG decode runs.

    Condition: JPEG images decoded by the default decoder, a consumer rate, and the trial's CPU
    decode measured. The CPU decode delivers the expected rate at the chosen count. Without the
    decode, the loader's CPU ceiling is the loading cores over the CPU per sample less the
    decode's, under the storage's ceilings. Decoded on the GPU in the training loop, each image
    costs the loop the GPU decode's time per image (measured on this machine's GPU, else the
    recorded figures, drawn through the image's pixels), so the loop runs at
    1 / (1 / consumer + that time). Stored decoded, the storage carries pixels x 3 bytes a sample
    Recommendation: decode where the loop gets the highest rate: on the CPU with the chosen
    workers unless the GPU (or stored pixels) delivers more beyond the noise; with what the GPU
    decode costs each step
    Source: measured: the trial's CPU decode and the GPU's batched nvJPEG decode (`python -m bench
    gpu`: on an H100, about 13,000 images/s of 0.17 Mpixel against 390 per core with Pillow)
    """

    id = "DEC-1"
    decision = DecisionKind.PREPROCESS
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        decode = ctx.trial.decode if ctx.trial is not None else None
        consumer = ctx.consumer_rate
        if (
            decode is None
            or consumer is None
            or ctx.profile.dominant_format != "jpeg"
            or ctx.workload.transform
            or ctx.profile.record_format
        ):
            return None
        gpu, measured_here = _gpu_figures(ctx)
        if gpu is None:
            return None
        pixels = _pixels(ctx, gpu, measured_here)
        if pixels is None:
            return None
        place = weigh(ctx, state, gpu, pixels)
        chosen = place.choice()
        count = state.get(Key.NUM_WORKERS, 0)
        where = "measured on this machine's GPU" if measured_here else gpu.recorded or gpu.device
        said = {
            "cpu": f"Decode on the CPU with {workers(count)}",
            "gpu": "Decode on the GPU, in the training loop",
            "pre-decoded": "Store the images decoded, once, offline",
        }[chosen]
        rates = (
            f"CPU {per_s(place.cpu)}, GPU {per_s(place.gpu)}, stored decoded "
            f"{per_s(place.pre_decoded)}"
        )
        rationale = (
            f"{said}: the loop gets {rate(place.rates()[chosen])} for a GPU that consumes "
            f"{rate(consumer)} (decoded on the {rates} samples/s). On the GPU each image takes "
            f"{duration(place.gpu_s_per_image)} of the training loop ({where}): "
            f"{share(min(place.gpu * place.gpu_s_per_image, 1.0))} of its time at "
            f"{rate(place.gpu)}. Stored decoded, a sample is {_size(pixels)}, "
            f"{place.inflation:.1f}x the JPEG."
        )
        return self.finding(
            chosen,
            rationale,
            evidence={
                "placement_samples_per_s": {k: round(v, 1) for k, v in place.rates().items()},
                "cpu_decode_s_per_sample": decode.cpu_s_per_sample,
                "gpu_s_per_image": place.gpu_s_per_image,
                "gpu_ms_per_batch": round(place.gpu_ms_per_batch, 3),
                "image_pixels": round(pixels),
                "gpu_figures": "measured here" if measured_here else gpu.recorded,
                "gpu_device": gpu.device,
            },
            measured=True,
        )


def weigh(ctx: Context, state: State, gpu: GpuDecode, pixels: float) -> Placement:
    """The rate each decode placement delivers to the training loop, from the model's ceilings at
    the chosen count and the measured decode costs."""
    decode = ctx.trial.decode if ctx.trial is not None else None
    assert decode is not None and ctx.consumer_rate is not None
    consumer = ctx.consumer_rate
    count = state.get(Key.NUM_WORKERS, 0)
    p = ctx.model(state, count)
    cores = loading_cores(count, max(ctx.cores_per_rank, 1), p.training_share)
    per_sample = cores / p.cpu_bound if p.cpu_bound > 0 else decode.cpu_s_per_sample
    rest = per_sample - decode.cpu_s_per_sample  # the CPU a sample takes without its decode
    undecoded_cpu = cores / rest if rest > 0 else math.inf  # the storage's ceilings then hold
    storage = min(p.latency_bound, p.bandwidth_bound)
    undecoded = min(undecoded_cpu, storage)
    on_gpu = gpu.seconds_per_image(pixels)
    inflation = pixels * CHANNELS / max(decode.bytes_per_sample, 1.0)
    return Placement(
        cpu=min(ctx.expected_rate(state), consumer),
        gpu=min(undecoded, 1 / (1 / consumer + on_gpu)),
        pre_decoded=min(undecoded_cpu, p.latency_bound, p.bandwidth_bound / inflation, consumer),
        gpu_s_per_image=on_gpu,
        gpu_ms_per_batch=on_gpu * ctx.workload.batch_size * 1e3,
        inflation=inflation,
    )


def _gpu_figures(ctx: Context) -> tuple[GpuDecode | None, bool]:
    """The GPU decode measured by the trial on this machine, else the recorded figures."""
    measured = ctx.trial.gpu_decode if ctx.trial is not None else None
    if measured is not None and not ctx.hardware.planned:
        return measured, True
    return recorded_gpu_decode(), False


def _pixels(ctx: Context, gpu: GpuDecode, measured_here: bool) -> float | None:
    """Pixels per image: what the GPU decoded here, else the CPU decode's output over RGB."""
    if measured_here and gpu.points:
        return gpu.points[0].mean_pixels
    decode = ctx.trial.decode if ctx.trial is not None else None
    if decode is None or not decode.output_bytes_per_sample:
        return None
    return decode.output_bytes_per_sample / CHANNELS


def _size(pixels: float) -> str:
    return data_size(pixels * CHANNELS)

"""Where the JPEG decode runs (DEC-1): on the CPU in the loader, on the GPU in the training loop,
or once, offline, into stored pixels. Weighed from the trial's CPU decode and the GPU's batched
decode (measured on this machine's GPU, else predicted from the figures recorded on a named
one), where training has a GPU; a place other than the CPU only where it gains beyond the noise
the trial measured (`advisor.decide.facts.gain`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.core.model import loading_cores
from advisor.core.units import data_size, duration, per_s, rate, share
from advisor.decide.facts.context import Context
from advisor.decide.facts.gain import (
    CHANNELS,
    gain_line,
    image_pixels,
    measured_gpu_here,
    weighs_decode_placement,
)
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.words import workers
from advisor.measure.hardware.gpu_decode import GpuDecode, recorded_gpu_decode

PLACES = ("cpu", "gpu", "pre-decoded")  # in order of preference where rates are equal


@dataclass(frozen=True)
class Placement:
    """The rate each place for the decode would deliver to the training loop (samples/s);
    `gpu` None where training has no GPU (or no figures for one)."""

    cpu: float
    gpu: float | None
    pre_decoded: float
    gpu_s_per_image: float | None  # the training loop's time per image decoded on the GPU
    gpu_ms_per_batch: float | None  # the GPU's own time per batch of the trial's batch size
    inflation: float  # a decoded sample's bytes over the stored JPEG's

    def rates(self) -> dict[str, float]:
        both = {"cpu": self.cpu, "gpu": self.gpu, "pre-decoded": self.pre_decoded}
        return {place: r for place, r in both.items() if r is not None}

    def choice(self, line: float) -> str:
        """The CPU (no change) unless another place delivers more than `line`, the rate a
        change must exceed to gain beyond the measured noise; then the fastest of those."""
        gaining = [p for p in PLACES[1:] if self.rates().get(p, 0.0) > line]
        return max(gaining, key=lambda p: self.rates()[p], default="cpu")


class DecodePlacement(Rule):
    """Where the JPEG decode runs.

    Condition: JPEG images decoded by the default decoder, a consumer rate, and the trial's CPU
    decode measured. The CPU decode delivers the expected rate at the chosen count. Without the
    decode, the loader's CPU ceiling is the loading cores over the CPU per sample less the
    decode's, under the storage's ceilings. Where training has a GPU (this machine's, or a
    target's: `--target-gpu`), decoded on the GPU in the training loop each image costs the loop
    the GPU decode's time per image (measured on this machine's GPU, else predicted from the
    recorded figures, drawn through the image's pixels), so the loop runs at
    1 / (1 / consumer + that time + the take); with no GPU, no GPU decode is weighed. Stored
    decoded, the storage carries pixels x 3 bytes a sample. With workers, the training thread
    takes each batch (a tensor a sample, decoded or the JPEG's bytes: the take per sample the
    trial measured), then steps, wherever the decode runs: 1 / (1 / consumer + the take)
    Recommendation: decode on the CPU with the chosen workers (no change) unless the GPU or
    stored pixels deliver more than every slice the trial measured at the chosen count and more
    than 5% over their median (beyond the measured noise); then the fastest of them, with what
    the GPU decode costs each step. A figure recorded on another GPU is a prediction, never
    "measured"
    Source: measured: the trial's CPU decode and the GPU's batched nvJPEG decode (`python -m bench
    gpu`: on an H100, about 13,000 images/s of 0.17 Mpixel against 390 per core with Pillow)
    """

    id = "DEC-1"
    decision = DecisionKind.PREPROCESS
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not weighs_decode_placement(ctx):
            return None
        assert ctx.trial is not None and ctx.trial.decode is not None
        pixels = image_pixels(ctx)
        assert pixels is not None and ctx.consumer_rate is not None
        gpu = _gpu_figures(ctx)
        place = weigh(ctx, state, gpu, pixels)
        line = gain_line(ctx, state)
        chosen = place.choice(line)
        count = state.get(Key.NUM_WORKERS, 0)
        here = measured_gpu_here(ctx)
        kept = (
            f"no other place gains beyond the measured noise (more than {rate(line)})"
            if math.isfinite(line)
            else "the loader keeps up, so no other place gains"
        )
        said = {
            "cpu": f"Keep the decode on the CPU with {workers(count)}: {kept}",
            "gpu": "Decode on the GPU, in the training loop",
            "pre-decoded": "Store the images decoded, once, offline",
        }[chosen]
        stored = f"stored decoded {per_s(place.pre_decoded)}"
        if gpu is None or place.gpu is None or place.gpu_s_per_image is None:
            rates = f"CPU {per_s(place.cpu)}, {stored}"
            on_gpu = (
                " No GPU decode is weighed: training has no GPU here or planned (--target-gpu)."
                if not ctx.has_gpu
                else " No GPU decode is weighed: none was measured here or recorded."
            )
        else:
            rates = f"CPU {per_s(place.cpu)}, GPU {per_s(place.gpu)}, {stored}"
            where = (
                "measured on this machine's GPU"
                if here
                else f"predicted from the figures {gpu.recorded}, not measured here"
            )
            on_gpu = (
                f" On the GPU each image takes {duration(place.gpu_s_per_image)} of the training "
                f"loop ({where}): {share(min(place.gpu * place.gpu_s_per_image, 1.0))} of its "
                f"time at {rate(place.gpu)}."
            )
        rationale = (
            f"{said}: the loop gets {rate(place.rates()[chosen])} for a GPU that consumes "
            f"{rate(ctx.consumer_rate)} (decoded on the {rates} samples/s).{on_gpu} Stored "
            f"decoded, a sample is {data_size(pixels * CHANNELS)}, {place.inflation:.1f}x the "
            "JPEG."
        )
        return self.finding(
            chosen,
            rationale,
            evidence={
                "placement_samples_per_s": {k: round(v, 1) for k, v in place.rates().items()},
                "a_gain_exceeds_samples_per_s": round(line, 1) if math.isfinite(line) else None,
                "cpu_decode_s_per_sample": ctx.trial.decode.cpu_s_per_sample,
                "gpu_s_per_image": place.gpu_s_per_image,
                "gpu_ms_per_batch": None
                if place.gpu_ms_per_batch is None
                else round(place.gpu_ms_per_batch, 3),
                "image_pixels": round(pixels),
                "gpu_figures": None if gpu is None else "measured here" if here else gpu.recorded,
                "gpu_device": None if gpu is None else gpu.device,
            },
            # the CPU's rate is the trial's; the GPU's a prediction unless measured here; stored
            # pixels' always the model's
            measured=chosen == "cpu" or (chosen == "gpu" and here),
        )


def weigh(ctx: Context, state: State, gpu: GpuDecode | None, pixels: float) -> Placement:
    """The rate each decode placement delivers to the training loop, from the model's ceilings at
    the chosen count and the measured decode costs (no GPU place where `gpu` is None)."""
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
    on_gpu = gpu.seconds_per_image(pixels) if gpu is not None else None
    inflation = pixels * CHANNELS / max(decode.bytes_per_sample, 1.0)
    # with workers the training thread takes each batch, then steps, in turn, wherever the
    # decode runs: a tensor a sample, decoded or the JPEG's bytes (the take measured per sample,
    # as the model's loop takes it for the CPU decode)
    take = (ctx.costs(state, count).main_s or 0.0) if count else 0.0
    stored = min(undecoded_cpu, p.latency_bound, p.bandwidth_bound / inflation)
    return Placement(
        cpu=min(ctx.expected_rate(state), consumer),
        gpu=None if on_gpu is None else min(undecoded, 1 / (1 / consumer + on_gpu + take)),
        pre_decoded=min(stored, 1 / (1 / consumer + take)),
        gpu_s_per_image=on_gpu,
        gpu_ms_per_batch=None if on_gpu is None else on_gpu * ctx.workload.batch_size * 1e3,
        inflation=inflation,
    )


def _gpu_figures(ctx: Context) -> GpuDecode | None:
    """The GPU decode measured by the trial on this machine, else the recorded figures; None
    where training has no GPU (none here, none planned): no GPU decode to weigh."""
    if not ctx.has_gpu:
        return None
    if measured_gpu_here(ctx):
        assert ctx.trial is not None
        return ctx.trial.gpu_decode
    return recorded_gpu_decode()

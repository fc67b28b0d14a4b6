"""Whether a change to how samples are made gains anything: its predicted rate against the
spread the trial measured at the chosen num_workers.

A change (decoding offline, on the GPU, storing pixels) is a gain only where the rate it
predicts lies above every slice the trial measured at the chosen count (`CountRate.high`) and
more than NOISE_CAP above their median; without a measurement there, more than NOISE_CAP above
the expected rate. A prediction inside that band is what a repeat of the trial may measure with
no change at all: offered, it turns the noise into advice (on the demo six runs of the same data
gave six placements, one of them beside its own figures of 249 against 248 samples/s).
"""

from __future__ import annotations

import math

from advisor.decide.facts.context import Context
from advisor.decide.keys import Key, State
from advisor.decide.thresholds import NOISE_CAP

CHANNELS = 3  # the default decoder's RGB output: bytes per pixel


def gain_line(ctx: Context, state: State) -> float:
    """The samples/s a change must exceed to gain beyond the measured noise at the chosen
    count (see the module docstring); infinite where the loader keeps up (MEAS-3 found it not
    input-bound): no change lets the training loop run faster than its step."""
    if not state.get(Key.INPUT_BOUND):
        return math.inf
    count = ctx.measured_counts(state).get(int(state.get(Key.NUM_WORKERS, 0)))
    if count is None:
        return ctx.expected_rate(state) * (1 + NOISE_CAP)
    return max(count.high, count.median * (1 + NOISE_CAP))


def gains(ctx: Context, state: State, predicted: float) -> bool:
    """True where `predicted` samples/s clears the measured noise (`gain_line`)."""
    return predicted > gain_line(ctx, state)


def measured_gpu_here(ctx: Context) -> bool:
    """True where the trial measured the GPU decode on this machine's GPU, the one training
    uses (not for a planned target machine)."""
    trial = ctx.trial
    return trial is not None and trial.gpu_decode is not None and not ctx.hardware.planned


def image_pixels(ctx: Context) -> float | None:
    """Pixels per image: what the GPU decoded here, else the CPU decode's output over RGB;
    None: neither measured."""
    trial = ctx.trial
    gpu = trial.gpu_decode if trial is not None else None
    if gpu is not None and gpu.points and measured_gpu_here(ctx):
        return gpu.points[0].mean_pixels
    decode = trial.decode if trial is not None else None
    if decode is None or not decode.output_bytes_per_sample:
        return None
    return decode.output_bytes_per_sample / CHANNELS


def weighs_decode_placement(ctx: Context) -> bool:
    """True where DEC-1 weighs where the decode runs (and MEAS-4 leaves the offline advice to
    it, which prices the decoded pixels' bytes): JPEG images through the default decoder, a
    consumer rate, and the trial's CPU decode measured with its images' size."""
    trial = ctx.trial
    return (
        trial is not None
        and trial.decode is not None
        and ctx.consumer_rate is not None
        and ctx.profile.dominant_format == "jpeg"
        and not ctx.workload.transform
        and not ctx.profile.record_format
        and image_pixels(ctx) is not None
    )

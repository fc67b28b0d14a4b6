"""Expected throughput, measured or predicted (MEAS-1, MEAS-2), input-bound (MEAS-3, MEAS-4)."""

from __future__ import annotations

import math
from typing import Any

from advisor.core.model import loading_cores
from advisor.core.reader_budget import READER_BUDGET_BYTES, first_batch_s, worker_memory_bytes
from advisor.core.units import duration, per_s, rate, share
from advisor.decide.bottleneck import Bottleneck, of_trial
from advisor.decide.facts.context import Context
from advisor.decide.facts.gain import gain_line, gains, weighs_decode_placement
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import BOTTLENECK_SHARE, NOISE_CAP
from advisor.decide.words import ceiling_words, storage_words, workers
from native_loader.loader import DEFAULT_PREFETCH


class MeasuredThroughput(Rule):
    """Expected throughput measured.

    Condition: the sweep measured the chosen num_workers (and training reads what the trial read)
    Recommendation: expected samples/s = measured, model prediction reported next to it; the
    evidence gives the measured time to the first batch and the model's memory per loader process
    Source: measured (samples/s are records/s for text shards read as records)
    """

    id = "MEAS-1"
    decision = DecisionKind.THROUGHPUT
    key = Key.EXPECTED_SAMPLES_PER_S

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        w = state.get(Key.NUM_WORKERS, 0)
        measured = ctx.measured_rates(state).get(w)  # none when training reads a copy or new shards
        if measured is None:
            return None
        predicted = ctx.predicted_rate(state, w)
        return self.finding(
            round(measured, 1),
            f"Measured {rate(measured)} with {workers(w)}; the model predicts {rate(predicted)}.",
            evidence={
                "measured_samples_per_s": measured,
                "predicted_samples_per_s": predicted,
                "sweep_samples_per_s": _model_vs_measured(ctx, state),
                **_start_and_memory(ctx, state, w),
            },
            measured=True,
            confidence="high",
        )


class ModelThroughput(Rule):
    """Expected throughput predicted.

    Condition: otherwise
    Recommendation: expected samples/s = model prediction, with its bottleneck: the training
    thread where, with workers, the loader alone would keep up with the consumer and the loop
    does not (it takes each batch, then steps, in turn); the evidence gives the model's time to
    the first batch and memory per loader process
    Source: model
    """

    id = "MEAS-2"
    decision = DecisionKind.THROUGHPUT
    key = Key.EXPECTED_SAMPLES_PER_S

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        w = state.get(Key.NUM_WORKERS, 0)
        p = ctx.model(state, w)
        predicted = ctx.predicted_rate(state, w)
        storage = ctx.read_storage(state)
        limit = p.bottleneck
        consumer = ctx.consumer_rate
        # with workers the training thread takes each batch, then steps: where the loader
        # alone keeps up and the loop does not, that turn-taking is the limit, not the loader
        if w > 0 and consumer and p.samples_per_s >= (1 - NOISE_CAP) * consumer > predicted:
            limit = "training"
        return self.finding(
            round(predicted, 1),
            f"Predicted {rate(predicted)} with {workers(w)}, reading from "
            f"{storage_words(storage.name)}; the limit is {ceiling_words(limit)}.",
            evidence={
                "predicted_samples_per_s": predicted,
                "bottleneck": limit,
                "storage": storage.name,
                # what the trial measured where the data lives now (e.g. before a local copy)
                "sweep_samples_per_s": _model_vs_measured(ctx, {**state, Key.DATA_SOURCE: "stream"})
                if ctx.measured_rates()
                else None,
                **_start_and_memory(ctx, state, w),
            },
            confidence="medium" if storage.measured or ctx.cpu_measured else "low",
        )


class InputBound(Rule):
    """Input-bound.

    Condition: expected samples/s < 0.95 x consumer rate (a rate measured in the training loop
    never exceeds the consumer, and the loop's own per-batch work keeps it a little under)
    Recommendation: `input_bound = True`; where the chosen count's slices lie on both sides of
    that line, it says so: a repeat of the trial may find the loader keeping up
    Source: measured/predicted vs consumer rate
    """

    id = "MEAS-3"
    decision = DecisionKind.THROUGHPUT
    key = Key.INPUT_BOUND

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        expected, consumer = state.get(Key.EXPECTED_SAMPLES_PER_S), ctx.consumer_rate
        if expected is None or consumer is None or expected >= consumer * (1 - NOISE_CAP):
            return None
        line = consumer * (1 - NOISE_CAP)
        count = ctx.measured_counts(state).get(int(state.get(Key.NUM_WORKERS, 0)))
        close = count is not None and count.low < line <= count.high
        noise = (
            f" Within the noise: its slices read {rate(count.low)} to {rate(count.high)}, on "
            f"both sides of the {rate(line)} that keeps up, so a repeat may find it keeping up."
            if close and count is not None
            else ""
        )
        return self.finding(
            True,
            f"The loader delivers {per_s(expected)} of the {rate(consumer)} the GPU consumes: "
            f"the GPU waits {share(1 - expected / consumer)} of the time.{noise}",
            evidence={
                "expected_samples_per_s": expected,
                "consumer_rate_samples_per_s": consumer,
                "within_noise": close,
            },
        )


class CpuBoundDecode(Rule):
    """Decode is the bottleneck.

    Condition: input-bound and the model's bottleneck is the CPU; where the trial measured the
    chosen count, only if that rate reaches BOTTLENECK_SHARE of the CPU ceiling (the cores left
    for loading over the measured CPU per sample), and the measured bottleneck (the stage whose
    measured ceiling lies nearest that rate: storage, decode, hand-over between processes, cores)
    is decode or the cores: else the measurements say decoding is not what holds the loader
    back, and the advice is not given. Nor is it given where the measured rate exceeds the
    ceiling (estimated wrong), or where a count above the chosen one, within the caps, was not
    measured and the measured ceilings leave room for it (the bottleneck is then "workers").
    Nor where the rate with the decode's CPU taken out (the measured ceilings at the chosen
    count, its decode and cores stages without the decode's CPU per sample, under the consumer;
    the model's where the count was not measured) gains nothing beyond the measured noise
    (above every slice at the chosen count and 5% over their median), nor for the JPEG images
    DEC-1 weighs (storing them decoded, priced in their pixels' bytes, is its advice)
    Recommendation: do deterministic decode/resize offline, keep random augmentation online
    Source: [IO] 2: make `__getitem__` cheap (1 worker reached the speed of 7); measured: the
    sweep's rate at the chosen count against the decode ceiling
    """

    id = "MEAS-4"
    decision = DecisionKind.PREPROCESS
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not state.get(Key.INPUT_BOUND) or weighs_decode_placement(ctx):
            return None
        count = state.get(Key.NUM_WORKERS, 0)
        p = ctx.model(state, count)
        if p.bottleneck != "cpu":
            return None
        measured = ctx.measured_rates(state).get(count)
        found = of_trial(ctx, state)
        if found is not None and found.contradicts_cpu_advice():
            return None  # measured: something less CPU per sample would not lift limits it
        # the ceiling the measurements named, where they did: the model's can sit below the
        # rate the sweep measured (its cores for loading are a prediction)
        named = next((c for c in found.ceilings if c.stage == found.stage), None) if found else None
        ceiling = named.samples_per_s if named is not None else p.cpu_bound
        if measured is not None and measured < BOTTLENECK_SHARE * ceiling:
            return None  # decoding leaves capacity unused: it is not what limits the loader
        if measured is not None and measured > (1 + NOISE_CAP) * ceiling:
            return None  # the measurement exceeds the ceiling: it was estimated wrong
        offline = offline_rate(ctx, state, found)
        if not gains(ctx, state, offline):
            return None  # without the decode the loader would read within the measured noise
        at = f"; it reads {rate(measured)}" if measured is not None else ""
        if named is not None:
            cap = f"The CPU caps the loader at {rate(ceiling)} with {workers(count)} ({named.how})"
        else:
            cap = (
                f"{duration(ctx.cpu_s_per_sample)} of CPU per sample caps the loader at "
                f"{rate(ceiling)} with {workers(count)}"
            )
        return self.finding(
            "preprocess-offline",
            f"{cap}{at}: move deterministic decode/resize offline, keep random augmentation "
            f"(without the decode the loader would read about {rate(offline)}).",
            evidence={
                "cpu_s_per_sample": ctx.cpu_s_per_sample,
                "cpu_bound_samples_per_s": ceiling,
                "offline_samples_per_s": offline,
                "a_gain_exceeds_samples_per_s": round(gain_line(ctx, state), 1),
                "measured_samples_per_s": measured,
                "bottleneck": found.stage if found is not None else None,
            },
            measured=ctx.cpu_measured,
        )


def offline_rate(ctx: Context, state: State, found: Bottleneck | None) -> float:
    """Samples/s the loop would get with the decode done once, offline (its CPU gone, the
    samples stored as they are): the ceilings measured at the chosen count, the decode and cores
    stages without the decode's CPU per sample, under the consumer; the model's ceilings where
    the count was not measured (without a measured decode, all of the CPU per sample is its)."""
    consumer = ctx.consumer_rate or math.inf
    count = int(state.get(Key.NUM_WORKERS, 0))
    decode = ctx.trial.decode if ctx.trial is not None else None
    if found is not None and ctx.trial is not None and decode is not None:
        per_sample = {
            "decode": decode.loop_cpu_s_per_sample or decode.cpu_s_per_sample,
            "cores": ctx.trial.machine_s(count),
        }
        rates = [consumer]
        for c in found.ceilings:
            per = per_sample.get(c.stage)
            if c.lower_bound:
                continue
            if per is None:
                rates.append(c.samples_per_s)
            elif per > decode.cpu_s_per_sample:
                rates.append(c.samples_per_s * per / (per - decode.cpu_s_per_sample))
        return min(rates)
    p = ctx.model(state, count)
    cores = loading_cores(count, max(ctx.cores_per_rank, 1), p.training_share)
    per = cores / p.cpu_bound if p.cpu_bound > 0 else 0.0
    rest = per - (ctx.cpu_s_per_sample if decode is not None else per)
    without = cores / rest if rest > 0 else math.inf
    return min(without, p.latency_bound, p.bandwidth_bound, consumer)


def _model_vs_measured(ctx: Context, state: State) -> dict[str, dict[str, float]]:
    """Per measured num_workers: the measured samples/s and the model's prediction."""
    return {
        str(w): {"measured": round(r, 1), "predicted": round(ctx.predicted_rate(state, w), 1)}
        for w, r in sorted(ctx.measured_rates().items())
    }


def _start_and_memory(ctx: Context, state: State, w: int) -> dict[str, Any]:
    """The time to the first batch (measured by the sweep where training reads what it read,
    else the model's) and the model's bytes per loader process beyond its interpreter
    (`advisor.core.model.worker_memory_bytes`): streamed shards count their read-ahead, objects
    read whole count one whole object each."""
    object_bytes, spo = ctx.layout(state)
    streamed = ctx.streamed(state)
    storage = ctx.read_storage(state)
    trial = ctx.trial if w in ctx.measured_counts(state) else None
    measured = trial.first_batch_s(w) if trial is not None else None
    predicted = first_batch_s(
        object_bytes=object_bytes, samples_per_object=spo, batch_size=ctx.workload.batch_size,
        cpu_s_per_sample=ctx.cpu_s_per_sample, storage=storage, streamed=streamed,
        processes=max(w, 1),
    )  # fmt: skip
    memory = worker_memory_bytes(
        object_bytes, state.get(Key.INFLIGHT_BYTES) or READER_BUDGET_BYTES, ctx.batch_bytes,
        state.get(Key.PREFETCH_FACTOR) or DEFAULT_PREFETCH, streamed=streamed,
    )  # fmt: skip
    return {
        "first_batch_s": round(measured if measured is not None else predicted, 3),
        "first_batch_measured": measured is not None,
        "worker_memory_bytes": round(memory),
        "streamed": streamed,
    }

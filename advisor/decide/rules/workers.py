"""DataLoader num_workers: the caps (NW-1, NW-2), the choice (NW-3 measured, NW-4 model) and
the count that deals the shards evenly (NW-5).

The reasoning NW-1 and NW-3 share about the measured counts lives here too, as functions of the
context (the context itself holds only facts; the measured counts are `SweepEvidence`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from advisor.core.model import choose_workers
from advisor.core.units import counted, data_size, per_s, rate
from advisor.decide.bottleneck import measured_steady, unmeasured_room
from advisor.decide.facts.context import Context
from advisor.decide.facts.dealing import balance, balance_words
from advisor.decide.facts.measured import choose, choose_measured, sweep_table
from advisor.decide.facts.readpath import first_epoch_rates, read_path_rationale, why_model
from advisor.decide.keys import Confidence, DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import (
    HEADROOM,
    MAX_SEARCH_WORKERS,
    RAM_FRACTION_FOR_WORKERS,
    TOLERANCE,
)
from advisor.decide.words import workers
from advisor.measure.trial.results import STEP_NONE, STEP_WORDS, CountRate


def core_cap(ctx: Context, state: State) -> int:
    """Workers up to the cores per rank when the trial measured what training reads (the
    measurements decide whether the last core is worth a worker); else the cores the training
    thread's share of a core leaves (`Context.training_share`: its step's duty cycle and the
    hand-over at the predicted rate), rounded up."""
    cores = ctx.cores_per_rank
    if ctx.measured_rates(state):
        return ctx.worker_slots
    return max(math.ceil(cores - ctx.training_share(state, ctx.worker_slots) - 1e-9), 0)


def ram_cap(ctx: Context) -> int:
    """Workers whose memory fits: each is a process with its own dataset copy [IO]."""
    ram = ctx.ram_per_rank
    if ram is None:
        return MAX_SEARCH_WORKERS
    return max(int(ram * RAM_FRACTION_FOR_WORKERS // ctx.worker_rss_bytes), 0)


def unconstrained_workers(ctx: Context, state: State) -> int:
    """The workers the throughput alone asks for, before cores and RAM bound it."""
    measured = ctx.measured_counts(state)
    if measured:
        return choose_measured(measured, ctx.consumer_rate)[0]
    # as if every worker had a core of its own: what the data and storage ask for
    rates = ctx.model_rates(state, range(1, MAX_SEARCH_WORKERS + 1), MAX_SEARCH_WORKERS + 1)
    return choose_workers(rates, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)


def workers_cap(ctx: Context, state: State) -> int:
    """The most workers the cores (NW-1) and the RAM (NW-2) allow."""
    return min(
        state.get(Key.WORKERS_CAP_CORES, core_cap(ctx, state)),
        state.get(Key.WORKERS_CAP_RAM, ram_cap(ctx)),
    )


class WorkersCappedByCores(Rule):
    """Cores bound the workers.

    Condition: the workers the throughput asks for exceed the cap
    Recommendation: cap num_workers at the cores per rank when the trial measured what the training
    reads (its measurements decide whether the last core is worth a worker); else, for the model
    (NW-4), at the cores the training thread's share of a core leaves, rounded up: at the rate the
    model predicts, a spinning step holds its core rate / consumer rate of the time, and taking
    the batches costs the training thread's CPU per sample (measured by the sweep, or the model's
    hand-over) x the rate
    Source: [IO] 2: "scale up to (CPU count - 1)"; measured: the training-loop sweep up to the
    cores, the training thread's CPU per sample
    """

    id = "NW-1"
    decision = DecisionKind.NUM_WORKERS
    key = Key.WORKERS_CAP_CORES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        wanted = unconstrained_workers(ctx, state)
        cap = core_cap(ctx, state)
        if wanted <= cap:
            return None
        why = (
            "the trial measured counts up to them"
            if ctx.measured_rates(state)
            else "the training process keeps its share of a core"
        )
        cores = ctx.cores_per_rank
        confidence: Confidence = "high"
        more = "More cores per rank would help."
        if ctx.hardware.target is None and ctx.ranks_per_node > 1:
            confidence = "low"  # a plan for the notebook, not for the node the job runs on
            more = (
                f"This machine's {ctx.hardware.usable_cores:g} cores are shared by "
                f"{counted(ctx.ranks_per_node, 'rank')}: for the node you will train on, name it "
                "(--target-instance, or --target-cores) and the model plans for its cores."
            )
        return self.finding(
            cap,
            f"Throughput alone would use {counted(wanted, 'worker')}, but {cores:.3g} "
            f"{'core' if cores == 1 else 'cores'} per rank allow{'s' if cores == 1 else ''} "
            f"{cap} ({why}). {more}",
            evidence={
                "usable_cores": ctx.hardware.usable_cores,
                "ranks_per_node": ctx.ranks_per_node,
                "workers_wanted": wanted,
            },
            confidence=confidence,
        )


class WorkersCappedByRam(Rule):
    """RAM bounds the workers.

    Condition: RAM per rank x 0.75 / worker memory is below the other caps
    Recommendation: cap num_workers there
    Source: [IO] 2: each worker has its own dataset copy, memory grows linearly
    """

    id = "NW-2"
    decision = DecisionKind.NUM_WORKERS
    key = Key.WORKERS_CAP_RAM

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        wanted = min(unconstrained_workers(ctx, state), state.get(Key.WORKERS_CAP_CORES, 1 << 30))
        if ram_cap(ctx) >= wanted:
            return None
        return self.finding(
            ram_cap(ctx),
            f"Each worker holds about {data_size(ctx.worker_rss_bytes)}; the "
            f"{data_size(ctx.ram_per_rank or 0)} available per rank fits "
            f"{counted(ram_cap(ctx), 'worker')}.",
            evidence={
                "ram_available_bytes": ctx.hardware.ram_available_bytes,
                "worker_rss_bytes": ctx.worker_rss_bytes,
                "workers_wanted": wanted,
            },
            measured=bool(ctx.trial and ctx.trial.sweep),
        )


class WorkersFromSweep(Rule):
    """Workers from the measured sweep.

    Condition: the trial's training-loop sweep has counts within the caps (and training reads what
    the trial read: the same read path, a local copy or a packed sample included, under the
    trial's setup, on this machine)
    Recommendation: among the measured counts within the caps, the smallest whose score is within
    the measured noise of the best score, or the smallest that already delivers >= 1.2 x the
    consumer rate with every step model. A count's score is the lowest, over the two step models
    (the consumer's step as a blocking wait and as a spinning core), of its median over that
    model's best median, so the choice must be good both ways; the measured noise is the larger
    half-range of the count's slices and the best count's, as a share of the best median (the
    largest over the models), and never more than 5%. Measured in a training loop no count reads
    faster than its consumer, so with a consumer rate the 1.2 x test is met only through the
    first. A count that reached no steady state is a lower bound (shown as ">="): it counts where
    it reaches the best steady median, else it is left out and named. The confidence is high only
    where a repeated trial would choose the same: no lower bound, no measured count within the
    noise of the line the choice drew (the best score less the tolerance, or 1.2 x the consumer
    rate; a larger count that close to the best, which a repeat may make the best; such counts
    are named), and no count above the chosen one left unmeasured while the
    ceilings measured there (the cores over the busy CPU per sample, the storage) leave room (the
    rationale then says so and what they allow). The evidence holds the measured table (median,
    range, lower bound, the model's prediction and its error per count, the training thread's
    share of a core measured and predicted, `sweep_table`) and the model's error at the chosen
    count (`prediction_error`)
    Source: measured: samples/s per num_workers in the trial's training loop
    (`advisor/measure/trial/sweep.py`)
    """

    id = "NW-3"
    decision = DecisionKind.NUM_WORKERS
    key = Key.NUM_WORKERS

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        cap = workers_cap(ctx, state)
        counts = {w: c for w, c in ctx.measured_counts(state).items() if w <= cap}
        if not counts:
            return None
        choice = choose(counts, ctx.consumer_rate)
        w, top, reason = choice.count, choice.top, choice.reason
        chosen = counts[w]
        predicted = ctx.predicted_rate(state, w)
        rationale = _measured_reason(w, top, counts, reason, ctx.consumer_rate)
        rationale = rationale[:1].upper() + rationale[1:]  # "No workers ...", as sentences start
        rationale += f" {_spread(chosen)}; the model predicted {per_s(predicted)}."
        rationale += read_path_rationale(ctx, state)
        unsteady = ctx.lower_bounds_left_out()
        if unsteady:
            rationale += (
                f" Left out: num_workers={', '.join(map(str, sorted(unsteady)))} reached no steady "
                "state within the trial (a lower bound, below the other counts); a longer trial "
                f"measures {'it' if len(unsteady) == 1 else 'them'}."
            )
        lower = any(c.lower_bound for c in counts.values())
        if all(c.lower_bound for c in counts.values()):
            rationale += (
                " No count reached a steady state within the trial: these rates include "
                "start-up (lower bounds); a longer trial measures them."
            )
        close = [v for v in choice.close if v != w]
        if close and not reason.startswith("noise"):
            names = ", ".join(map(str, close))
            rationale += (
                f" num_workers={names} came within the measured noise of this choice: a "
                "repeated trial may choose it."
            )
        room = unmeasured_room(ctx, {**state, Key.NUM_WORKERS: w}, w)
        if room is not None:
            rationale += (
                f" Counts above {w} were not measured within the trial; the measured ceilings "
                f"allow {rate(room.samples_per_s)} ({room.how}), so more workers may read faster: "
                "a longer trial measures them."
            )
        firm = not (lower or unsteady or close or room is not None)
        return self.finding(
            w,
            rationale,
            evidence={
                "sweep_table": sweep_table(ctx, state),
                "prediction_error": round(predicted / chosen.median - 1, 3),
                "consumer_rate_samples_per_s": ctx.consumer_rate,
                "cap": cap,
                "read_path": ctx.reads.path(state),
                "first_epoch_samples_per_s": first_epoch_rates(ctx),
                "within_noise_of": close,
                "unmeasured_ceiling_samples_per_s": None
                if room is None
                else round(room.samples_per_s, 1),
            },
            measured=True,
            confidence="high" if firm else "medium",
        )


class WorkersFromModel(Rule):
    """Workers from the throughput model.

    Condition: otherwise (no trial, a target machine, a trial under another setup, or training reads
    something the trial could not make: shards streamed from S3, or a local copy or packed sample
    it had no room for)
    Recommendation: smallest num_workers (from 1 when a whole core is free of the training thread's
    share) whose predicted loader rate >= 1.2 x consumer, else smallest within 5% of the best
    prediction, within NW-1's cap (the cores the training thread's share leaves); the rationale
    says it is a prediction and why, with the rate training sees at that count (the throughput
    card's: the loader through the consumer's step) beside the loader's own. For shards
    streamed from S3, the model takes the training thread's CPU per sample that the trial measured
    on a packed sample
    Source: model (below)
    """

    id = "NW-4"
    decision = DecisionKind.NUM_WORKERS
    key = Key.NUM_WORKERS

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        cap = workers_cap(ctx, state)
        # from 1 when a whole core is free of the training thread's share, else from 0: a
        # worker on what is left of a core reads no faster than the training process
        free = ctx.cores_per_rank - ctx.training_share(state, 1)
        rates = ctx.model_rates(state, range(min(1 if free >= 1 else 0, cap), cap + 1))
        w = choose_workers(rates, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)
        storage = ctx.read_storage(state)
        measured_inputs = storage.measured or ctx.cpu_measured
        trained = {k: ctx.predicted_rate(state, k) for k in rates}  # the throughput card's
        # local files (a copy) are read, not requested: not the S3 probe's one connection
        local = ("local_first_read_s", "local_read_mb_s")
        first, one = local if storage.local else ("first_byte_s", "per_connection_mb_s")
        return self.finding(
            w,
            f"A prediction of the throughput model ({why_model(ctx, state)}): "
            + _workers_rationale(w, rates, trained[w], ctx.consumer_rate),
            evidence={
                "predicted_samples_per_s": {str(k): round(v, 1) for k, v in trained.items()},
                "loader_samples_per_s": {str(k): round(v, 1) for k, v in rates.items()},
                "bottleneck": ctx.model(state, w).bottleneck,
                first: storage.first_byte_s,
                one: storage.per_connection_mb_s,
                "cpu_s_per_sample": ctx.cpu_s_per_sample,
                "training_core_share": round(ctx.training_share(state, max(w, 1)), 3),
                "cap": cap,
            },
            confidence="medium" if measured_inputs else "low",
        )


def _measured_reason(
    w: int, top: int, counts: Mapping[int, CountRate], reason: str, consumer: float | None
) -> str:
    how = "with a blocking and with a spinning step" if consumer else "with no step"
    if len(counts) == 1:
        return f"{workers(w)}: the only measured count the cores and memory allow."
    if reason == "headroom":
        return (
            f"{workers(w)} deliver at least 1.2x the {rate(consumer or 0)} the GPU "
            f"consumes, as training sees it {how}; more workers would only cost memory."
        )
    if reason.startswith("noise"):
        noise = float(reason.partition(":")[2] or 0)
        return (
            f"{workers(w)}: within the measured noise of {workers(top)} (±{noise:.0%}), as "
            f"training sees it {how}: fewer processes and less memory."
        )
    return f"{workers(w)}: the best measured as training sees it {how}."


def _spread(c: CountRate) -> str:
    bound = "at least " if c.lower_bound else ""
    step = f" with {STEP_WORDS.get(c.step, c.step)}" if c.step != STEP_NONE else ""
    slower = ", the slower of the two" if len(c.steps) > 1 else ""
    return (
        f"{bound}{rate(c.median)} median ({per_s(c.low)} to {per_s(c.high)} over "
        f"{counted(c.slower.slices, 'slice')}{step}{slower})"
    )


def _workers_rationale(
    w: int, rates: Mapping[int, float], trained: float, consumer: float | None
) -> str:
    """NW-4's reasoning: the loaders' own predicted `rates` (what the choice weighs) and, with a
    consumer, what training sees at the chosen count (`trained`, the throughput card's); the
    loaders' rates as the evidence holds them (to a tenth): one figure in both."""
    best, mine = round(max(rates.values()), 1), round(rates[w], 1)
    if consumer is None:
        head = f"{workers(w)} deliver {rate(mine)} (predicted)"
    else:
        head = (
            f"{workers(w)}: the model predicts {rate(trained)} as training sees it; their "
            f"loader alone would deliver {rate(mine)}"
        )
    if len(rates) == 1:
        return f"{head}, the only count the cores and memory allow."
    if consumer is not None and rates[w] >= consumer * HEADROOM:
        return (
            f"{head}, at least 1.2x the {rate(consumer)} the GPU consumes; more workers would "
            "only cost memory."
        )
    return f"{head}, within 5% of the best {rate(best)} over {min(rates)} to {max(rates)} workers."


class WorkersBalanceShards(Rule):
    """Workers that deal the shards evenly.

    Condition: the chosen num_workers (with one process or none: the most the caps allow,
    NW-1's cores and NW-2's memory, no more than the objects per rank) is dealt the epoch's
    objects per rank unevenly (the datasets deal them whole, in turn, to ranks x workers
    readers; fewer objects than workers are COST-5's), at a cost beyond the noise (5%): over
    whole epochs (`epoch_rate`) they read slower than with every worker busy, priced as the
    bottleneck prices it where the trial measured that count, else by the model
    Recommendation: the smallest num_workers above it that deals the objects per rank evenly (a
    divisor of them: at most one each), where the RAM allows it (and 32 at most) and it gains
    more than the noise over the chosen count's rate (measured where the trial measured it),
    over whole epochs (`epoch_rate`) from one worker's rate alone (the model's, from the
    measured costs) and the lowest ceiling the trial measured with every worker busy (the
    cores more workers share hold no more), else from the model: with cores that idle through
    an epoch's last shard, or processes that wait on their reads, workers above the cores pay;
    else, where the chosen count is dealt unevenly, re-shard into a multiple of its readers
    (ranks x workers) no larger than the epoch's samples (a shard holds whole samples), priced
    as those samples dealt one by one (the busiest worker reads an even share rounded up) with
    every worker busy. Both with the predicted gain; the value is the count, or the shards. The
    chosen count stands: the trial measures no count above the cores
    Source: `S3IterableDataset.shard` (native_loader/datasets.py); model: `epoch_rate`; measured
    (issue 56): 3 tar shards over 2 workers on 2 cores read 474 samples/s, over 4 workers 588
    """

    id = "NW-5"
    decision = DecisionKind.NUM_WORKERS
    key = None  # advisory: the chosen count stands (measured, or the model's within the caps)

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        found = balance(
            ctx, state, workers_cap(ctx, state), ram_cap(ctx),
            lambda workers: measured_steady(ctx, state, workers),
        )  # fmt: skip
        if found is None:
            return None
        return self.finding(
            found.workers if found.workers is not None else found.shards,
            balance_words(ctx, state, found),
            evidence={
                "balancing_workers": found.workers,
                "balancing_shards": found.shards,
                "balanced_samples_per_s": round(found.predicted, 1),
                "balanced_gain": round(found.gain, 3),
            },
            confidence="medium" if ctx.trial is not None else "low",
        )

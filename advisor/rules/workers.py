"""DataLoader num_workers: the caps (NW-1, NW-2) and the choice (NW-3 measured, NW-4 model).

The reasoning NW-1 and NW-3 share about the measured sweep lives here too, as functions of the
context (the context itself holds only facts).
"""

from __future__ import annotations

from collections.abc import Mapping

from advisor.model import READER_BUDGET_BYTES, choose_workers
from advisor.rules.base import Finding, Key, Rule, State
from advisor.rules.context import Context
from advisor.rules.thresholds import (
    BUDGET_OBJECTS_FOR_TIE,
    HEADROOM,
    IO_BOUND_MAIN_SHARE,
    MAX_SEARCH_WORKERS,
    MEASURED_GAIN,
    RAM_FRACTION_FOR_WORKERS,
    TOLERANCE,
)
from advisor.rules.units import MB, gb, per_s


def core_cap(ctx: Context, state: State) -> int:
    """[IO] workers up to CPU count - 1: one core stays with the main (training) process.

    Unless the trial measured a worker on every core clearly (MEASURED_GAIN) faster than the
    best worker count within that cap, for what the training reads: then the last core is
    worth it. (Between that point and 0 workers, NW-3 chooses on the measured rates.)
    """
    cap = max(ctx.cores_per_rank - 1, 0)
    rates = ctx.measured_rates(state)
    low = 0 if cap == 0 else 1
    within = max((r for w, r in rates.items() if low <= w <= cap), default=0.0)
    every_core = rates.get(ctx.cores_per_rank, 0.0)
    if within > 0 and every_core > within * MEASURED_GAIN:
        return ctx.cores_per_rank
    return cap


def ram_cap(ctx: Context) -> int:
    """Workers whose memory fits: each is a process with its own dataset copy [IO]."""
    ram = ctx.ram_per_rank
    if ram is None:
        return MAX_SEARCH_WORKERS
    return max(int(ram * RAM_FRACTION_FOR_WORKERS // ctx.worker_rss_bytes), 0)


def unconstrained_workers(ctx: Context, state: State) -> int:
    """The workers the throughput alone asks for, before cores and RAM bound it."""
    measured = {w: r for w, r in ctx.measured_rates(state).items() if w >= 1}
    if measured:
        return choose_workers(measured, ctx.consumer_rate, headroom=HEADROOM)
    # as if every worker had a core of its own: what the data and storage ask for
    rates = ctx.model_rates(state, range(1, MAX_SEARCH_WORKERS + 1), MAX_SEARCH_WORKERS + 1)
    return choose_workers(rates, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)


def zero_measured_ahead(ctx: Context, state: State) -> bool:
    """The trial measured 0 workers at least `zero_lead` x every worker count within
    cores - 1 (what NW-3 would choose from otherwise), or x every worker count when none
    was measured there.

    With a consumer rate c, as the training would see it: with workers, loading and the
    step overlap (min(r, c)); with 0 workers, the loader's work in the main thread (its
    measured CPU per sample, m) and the step take turns while the reader's own thread
    fetches on, so a sample takes max(1/r0, m + 1/c). Without a measured m, all of 1/r0
    takes turns: 1 / (1/r0 + 1/c).
    """
    rates = ctx.measured_rates(state)
    if 0 not in rates:
        return False
    zero = rates[0]
    guided = max(ctx.cores_per_rank - 1, 1)
    with_workers = {w: r for w, r in rates.items() if 1 <= w <= guided} or {
        w: r for w, r in rates.items() if w >= 1
    }
    if not with_workers:
        # only 0 measured: nothing to compare a bare loader with; with a step, no evidence
        return ctx.consumer_rate is None
    best = max(workers_as_trained(ctx, with_workers))
    return zero_as_trained(ctx, zero) >= best * zero_lead(ctx, zero)


def zero_lead(ctx: Context, zero_rate: float) -> float:
    """How far 0 workers must lead the worker counts: MEASURED_GAIN, so that a tie (or
    noise) goes to workers; but when the main thread was busy at most IO_BOUND_MAIN_SHARE
    of each sample's time at 0 workers, the reader's thread does the loading and a tie goes
    to 0 workers (no worker processes, copies or memory): within 1 / MEASURED_GAIN. Not
    when the reader's byte budget holds under BUDGET_OBJECTS_FOR_TIE objects: the budget
    bounds one process then, and each worker reads with a budget of its own."""
    main_idle = zero_main_cpu_s(ctx, zero_rate) <= IO_BOUND_MAIN_SHARE / zero_rate
    if main_idle and not budget_bound(ctx):
        return 1 / MEASURED_GAIN
    return MEASURED_GAIN


def trial_budget_bytes(ctx: Context) -> int:
    """The byte budget (max_inflight_bytes) per process the trial's sweep read with."""
    budget = ctx.trial.inflight_bytes if ctx.trial is not None else None
    return budget or READER_BUDGET_BYTES


def budget_bound(ctx: Context) -> bool:
    """In the trial, one process's reader held under BUDGET_OBJECTS_FOR_TIE of the objects
    in its byte budget: the budget, not the requests, bounded what it fetched."""
    return ctx.object_bytes * BUDGET_OBJECTS_FOR_TIE > trial_budget_bytes(ctx)


def workers_as_trained(ctx: Context, rates: Mapping[int, float]) -> list[float]:
    """Samples/s the training gets from each worker count: at most the consumer's rate."""
    c = ctx.consumer_rate
    return [r if c is None else min(r, c) for r in rates.values()]


def zero_as_trained(ctx: Context, zero_rate: float) -> float:
    """Samples/s the training gets from the 0-worker point (see `zero_measured_ahead`)."""
    c = ctx.consumer_rate
    if c is None:
        return zero_rate
    return 1 / max(1 / zero_rate, zero_main_cpu_s(ctx, zero_rate) + 1 / c)


def zero_main_cpu_s(ctx: Context, zero_rate: float) -> float:
    """Main-thread CPU seconds per sample of the 0-worker point that measured `zero_rate`
    (1 / zero_rate, all of a sample's time, when not measured)."""
    for p in ctx.trial.sweep if ctx.trial is not None else ():
        measured = p.main_cpu_s_per_sample
        if p.num_workers == 0 and p.samples_per_s == zero_rate and measured is not None:
            return min(measured, 1 / zero_rate)
    return 1 / zero_rate


def zero_on_merit(ctx: Context, state: State) -> bool:
    """0 workers measured ahead where that can be judged: a CPU-only run without a consumer
    rate (the loader's rate is all that counts), or any run with one."""
    judged = ctx.consumer_rate is not None or not ctx.has_gpu
    return judged and zero_measured_ahead(ctx, state)


def zero_workers_allowed(ctx: Context, state: State) -> bool:
    """num_workers=0 loads inside the training loop, so loading and compute never overlap.

    It is a candidate only when no core is free for a worker, or on its measured merit.
    """
    return workers_cap(ctx, state) == 0 or zero_on_merit(ctx, state)


def workers_cap(ctx: Context, state: State) -> int:
    return min(
        state.get(Key.WORKERS_CAP_CORES, core_cap(ctx, state)),
        state.get(Key.WORKERS_CAP_RAM, ram_cap(ctx)),
    )


class WorkersCappedByCores(Rule):
    """Cores bound the workers.

    Condition: the workers the throughput asks for exceed cores per rank - 1
    Recommendation: cap num_workers at max(cores per rank - 1, 0); the cap is the cores per rank
    when the trial measured a worker on every core more than 10% faster than the best worker count
    within cores - 1 (for what the training reads; between that point and 0 workers NW-3 chooses)
    Source: [IO] 2: "scale up to (CPU count - 1)"; measured: sweep at num_workers = cores
    """

    id = "NW-1"
    decision = "num_workers"
    key = Key.WORKERS_CAP_CORES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        wanted = unconstrained_workers(ctx, state)
        cap = core_cap(ctx, state)
        if wanted <= cap:
            return None
        why = (
            "the trial measured a worker on every core clearly faster"
            if cap == ctx.cores_per_rank
            else "one core stays with the training process"
        )
        return self.finding(
            cap,
            f"Throughput alone would use {wanted} workers, but {ctx.cores_per_rank} core(s) per "
            f"rank allow {cap} ({why}). More cores per rank would help.",
            evidence={
                "usable_cores": ctx.hardware.usable_cores,
                "ranks_per_node": ctx.ranks_per_node,
                "workers_wanted": wanted,
            },
            confidence="high",
        )


class WorkersCappedByRam(Rule):
    """RAM bounds the workers.

    Condition: RAM per rank x 0.75 / worker memory is below the other caps
    Recommendation: cap num_workers there
    Source: [IO] 2: each worker has its own dataset copy, memory grows linearly
    """

    id = "NW-2"
    decision = "num_workers"
    key = Key.WORKERS_CAP_RAM

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        wanted = min(unconstrained_workers(ctx, state), state.get(Key.WORKERS_CAP_CORES, 1 << 30))
        if ram_cap(ctx) >= wanted:
            return None
        return self.finding(
            ram_cap(ctx),
            f"Each worker holds ~{ctx.worker_rss_bytes / MB:,.0f} MB; "
            f"{gb(ctx.ram_per_rank or 0)} available per rank fits {ram_cap(ctx)} worker(s).",
            evidence={
                "ram_available_bytes": ctx.hardware.ram_available_bytes,
                "worker_rss_bytes": ctx.worker_rss_bytes,
                "workers_wanted": wanted,
            },
            measured=bool(ctx.trial and ctx.trial.sweep),
        )


class WorkersFromSweep(Rule):
    """Workers from the measured sweep.

    Condition: the trial's sweep has points within the caps (and training reads what the trial read)
    Recommendation: 0 workers when no core is free, or when it measured at least 10% faster than
    every worker count within cores - 1 and faster than every count within the caps, for a CPU-only
    run without consumer rate or for any run with one (within 10% of them is enough when the main
    thread was busy at most half of each sample's time at 0 workers: the reader's own thread does
    the loading, so workers would add processes and memory, not throughput; but not when the
    reader's byte budget, `max_inflight_bytes`, holds fewer than two objects: then the budget bounds
    one process, and each worker process reads with a budget of its own); else the smallest measured
    num_workers >= 1.2 x consumer rate, else the smallest within 5% of the best measured. With a
    consumer rate 0 workers is judged as training sees it: a sample every max(1/r0, m + 1/consumer)
    seconds, where m is the main thread's measured CPU per sample at 0 workers (the loader's Python
    work and the step take turns while the reader's own thread fetches on; 1/r0 + 1/consumer when m
    was not measured), against min(r, consumer) for workers (0 workers load in the training loop on
    one core: ties and noise go to workers unless the main thread was mostly idle and the budget
    holds two objects). A count that reached no steady state within its share of the trial measured
    a lower bound (start-up included): it counts only where it beats every steady count, else it is
    left out and named in the rationale (`lower_bounds_left_out` in the evidence); with any lower
    bound in the sweep the confidence is medium, and the trial's notes ask for a longer trial
    Source: measured: sweep samples/s per num_workers; the reader's byte budget
    (`ReaderConfig.max_inflight_bytes`)
    """

    id = "NW-3"
    decision = "num_workers"
    key = Key.NUM_WORKERS

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        cap = workers_cap(ctx, state)
        low = 0 if zero_workers_allowed(ctx, state) else 1
        rates = {w: r for w, r in ctx.measured_rates(state).items() if low <= w <= cap}
        if not rates:
            return None
        workers = {k: r for k, r in rates.items() if k >= 1}
        # 0 on its merit (or no core free) and also ahead of every worker count allowed (within
        # noise of them when the main thread was mostly idle, see Context.zero_lead)
        lead = min(zero_lead(ctx, rates[0]), 1.0) if 0 in rates else 1.0
        if 0 in rates and (
            not workers
            or zero_as_trained(ctx, rates[0]) >= max(workers_as_trained(ctx, workers)) * lead
        ):
            w = 0
        else:
            w = choose_workers(workers, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)
        if w == 0 and workers:
            rationale = _zero_rationale(ctx, rates[0], workers)
        else:
            rationale = _workers_rationale(w, rates, ctx.consumer_rate, "measured")
            zero = ctx.measured_rates(state).get(0)
            if zero is not None and _budget_broke_tie(ctx, zero, workers):
                rationale += (
                    f" 0 workers read {per_s(zero)} samples/s with the main thread mostly idle, "
                    f"within {MEASURED_GAIN - 1:.0%} of that; but objects of "
                    f"{gb(ctx.object_bytes)} fill the reader's {trial_budget_bytes(ctx) >> 20} MiB "
                    "byte budget: each worker process reads with a budget of its own, so the tie "
                    "goes to workers."
                )
        sweep = ctx.trial.sweep if ctx.trial is not None else ()
        unsteady = ctx.lower_bounds_left_out()
        if unsteady:
            rationale += (
                f" Left out: num_workers={', '.join(map(str, sorted(unsteady)))} reached no steady "
                "state within the trial (a lower bound, start-up included, below the other "
                f"counts); a longer trial measures {'it' if len(unsteady) == 1 else 'them'}."
            )
        elif not any(p.steady for p in sweep):
            rationale += (
                " No count reached a steady state within the trial: these rates include "
                "start-up (lower bounds); a longer trial measures them."
            )
        return self.finding(
            w,
            rationale,
            evidence={
                "measured_samples_per_s": {str(k): round(v, 1) for k, v in sorted(rates.items())},
                "lower_bounds_left_out": {str(k): round(v, 1) for k, v in sorted(unsteady.items())},
                "consumer_rate_samples_per_s": ctx.consumer_rate,
                "cap": cap,
            },
            measured=True,
            confidence="high" if all(p.steady for p in sweep) else "medium",
        )


class WorkersFromModel(Rule):
    """Workers from the throughput model.

    Condition: otherwise
    Recommendation: smallest num_workers (from 1 when a core is free) whose predicted rate >= 1.2 x
    consumer, else smallest within 5% of the best prediction
    Source: model (below)
    """

    id = "NW-4"
    decision = "num_workers"
    key = Key.NUM_WORKERS

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        cap = workers_cap(ctx, state)
        rates = ctx.model_rates(state, range(min(1, cap), cap + 1))
        w = choose_workers(rates, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)
        storage = ctx.storage_for(ctx.training_source(state))
        measured_inputs = storage.measured or ctx.cpu_measured
        return self.finding(
            w,
            _workers_rationale(w, rates, ctx.consumer_rate, "predicted"),
            evidence={
                "predicted_samples_per_s": {str(k): round(v, 1) for k, v in rates.items()},
                "bottleneck": ctx.model(state, w).bottleneck,
                "first_byte_s": storage.first_byte_s,
                "per_connection_mb_s": storage.per_connection_mb_s,
                "cpu_s_per_sample": ctx.cpu_s_per_sample,
                "cap": cap,
            },
            confidence="medium" if measured_inputs else "low",
        )


def _budget_broke_tie(ctx: Context, zero: float, workers: Mapping[int, float]) -> bool:
    """0 workers would have won as an I/O-bound tie but for the reader's byte budget."""
    if not budget_bound(ctx) or zero_main_cpu_s(ctx, zero) > IO_BOUND_MAIN_SHARE / zero:
        return False
    best = max(workers_as_trained(ctx, workers))
    return zero_as_trained(ctx, zero) * MEASURED_GAIN >= best


def _zero_rationale(ctx: Context, zero: float, workers: Mapping[int, float]) -> str:
    best_w = max(workers, key=lambda k: workers[k])
    main_ms = zero_main_cpu_s(ctx, zero) * 1e3
    text = f"0 workers: {per_s(zero)} samples/s measured, against {per_s(workers[best_w])} "
    text += f"with {best_w} worker(s)."
    if zero_lead(ctx, zero) < 1:
        text += (
            f" The main thread was busy {main_ms:,.2f} ms of each sample's {1e3 / zero:,.2f} ms "
            "while the reader's own thread fetched: workers would add processes and memory, "
            f"not throughput, so 0 workers needs no lead (within {MEASURED_GAIN - 1:.0%} is "
            "enough)."
        )
    else:
        text += (
            f" That is over {MEASURED_GAIN - 1:.0%} ahead of the worker counts within cores - 1."
        )
    if ctx.consumer_rate is not None:
        text += (
            f" In training the loader's {main_ms:,.2f} ms of main-thread work per sample and the "
            "step take turns while the reader fetches on: "
            f"~{zero_as_trained(ctx, zero):,.1f} samples/s."
        )
    return text


def _workers_rationale(
    w: int, rates: Mapping[int, float], consumer: float | None, kind: str
) -> str:
    best = max(rates.values())
    if len(rates) == 1:
        return f"{w} worker(s), the only choice within the caps: {rates[w]:,.0f} samples/s."
    if consumer is not None and rates[w] >= consumer * HEADROOM:
        return (
            f"{w} worker(s) deliver {rates[w]:,.0f} samples/s ({kind}), at least 1.2x the "
            f"{consumer:,.0f} samples/s the GPU consumes; more workers would only cost memory."
        )
    return (
        f"{w} worker(s) deliver {rates[w]:,.0f} samples/s ({kind}), within 5% of the best "
        f"{best:,.0f} samples/s over {min(rates)}-{max(rates)} workers."
    )

"""How an epoch's objects are dealt to a rank's loader processes, and what an uneven dealing
costs.

The datasets deal an epoch's objects (shards) whole, in turn, to the readers, ranks x workers
(`S3IterableDataset.shard`, native_loader/datasets.py). Where the objects per rank are no
multiple of the workers, some are dealt one more than the others, and each epoch ends with
those reading alone while the rest idle. The model's `epoch_rate` prices it: an epoch lasts at
least its samples at the rate of every process busy, and at least the busiest process's
samples at the rate one process reads alone. The bottleneck (`dealt_ceiling`) prices it from
the trial's measured ceilings; NW-5 (`balance`) prices the same way (by the model where the
trial measured nothing) what a count that deals the objects evenly, or a re-shard into a
multiple of the readers, would read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from advisor.core.model import epoch_rate, epoch_start_s
from advisor.core.units import counted, data_size, duration, rate
from advisor.decide.facts.context import Context
from advisor.decide.keys import Key, State
from advisor.decide.thresholds import MAX_SEARCH_WORKERS, NOISE_CAP


@dataclass(frozen=True)
class Dealing:
    """One epoch's `objects` per rank dealt whole, in turn, to the rank's `processes`."""

    objects: int
    processes: int
    unit: str = "shard"

    @property
    def busiest(self) -> int:
        """Objects of the process dealt the most."""
        return math.ceil(self.objects / max(self.processes, 1))

    @property
    def even(self) -> bool:
        """Every process is dealt as many (one process alone always is)."""
        return self.processes <= 1 or self.objects % self.processes == 0

    def words(self) -> str:
        """The dealing for people: "3 shards over 2 workers are dealt 2 + 1: one worker reads 2
        while the other idles through the last shard of each epoch"."""
        n, p = self.objects, self.processes
        few, more = divmod(n, p)
        what = f"{counted(n, self.unit)} over {counted(p, 'worker')}"
        if few == 0:
            idle = "1 gets none and idles" if p - n == 1 else f"{p - n} get none and idle"
            return f"{what}: {idle} all epoch"
        if p <= 4:
            dealt = " + ".join(str(few + (i < more)) for i in range(p))
        else:
            dealt = f"{few + 1} to {more} and {few} to {p - more}"
        readers = f"one worker reads {few + 1}" if more == 1 else f"{more} workers read {few + 1}"
        rest = p - more
        idle = f"{'the other' if more == 1 else 'one'} idles" if rest == 1 else f"{rest} idle"
        return (
            f"{what} are dealt {dealt}: {readers} while {idle} through the last {self.unit} "
            "of each epoch"
        )


def dealing(ctx: Context, state: State, workers: int) -> Dealing:
    """How `workers` are dealt one epoch's objects per rank, as `Context.model` counts them."""
    objects = math.ceil(ctx.objects_read(state) / max(ctx.ranks, 1))
    return Dealing(objects, max(workers, 1), "shard" if ctx.streamed(state) else "object")


def one_process_rate(ctx: Context, state: State, workers: int) -> float:
    """Samples/s one of `workers` loader processes reads alone, as the model has it from the
    trial's measured costs (`Prediction.process_samples_per_s`): its reads at once over the
    time a read takes, and its own CPU per sample (a worker's, measured at that count where the
    sweep did)."""
    return ctx.model(state, workers).process_samples_per_s


@dataclass(frozen=True)
class DealtCeiling:
    """The samples/s an uneven dealing allows, with every process busy at `steady` and one
    alone at `alone`, and how it comes about in words."""

    samples_per_s: float
    steady: float
    alone: float
    dealt: Dealing

    @property
    def how(self) -> str:
        return (
            f"{self.dealt.words()}; one worker alone reads {rate(self.alone)} "
            f"({duration(1 / self.alone)} a sample), {rate(self.steady)} with every worker busy"
        )


def dealt_ceiling(
    ctx: Context, state: State, workers: int, steady: float | None
) -> DealtCeiling | None:
    """What the dealing at `workers` lets through over whole epochs (`epoch_rate`), where it
    costs more than the noise: `steady` is the lowest measured ceiling with every process busy
    (None: none measured), and no more than every process at what one reads alone. None: an
    even dealing, or one that costs no more than the noise."""
    dealt = dealing(ctx, state, workers)
    if workers < 2 or dealt.even:
        return None
    alone = one_process_rate(ctx, state, workers)
    if not 0 < alone < math.inf:
        return None
    busy = min(steady if steady is not None else math.inf, alone * workers)
    _, spo = ctx.layout(state)
    start = epoch_start_s(ctx.read_storage(state), ctx.costs(state, workers))
    over_epochs = epoch_rate(busy, alone, workers, dealt.objects, spo, start)
    if over_epochs >= (1 - NOISE_CAP) * busy:
        return None
    return DealtCeiling(over_epochs, busy, alone, dealt)


@dataclass(frozen=True)
class Balance:
    """NW-5's advice: `workers` that deal the objects evenly (None: no count the RAM allows
    gains), else a re-shard into `shards`, a multiple of the readers; the loop's predicted rate
    after it against `before` (measured where the trial measured the chosen count)."""

    dealt: Dealing
    workers: int | None
    shards: int | None
    predicted: float
    before: float
    measured: bool

    @property
    def gain(self) -> float:
        return self.predicted / self.before - 1


def balance(
    ctx: Context,
    state: State,
    cap: int,
    ram_cap: int,
    steady_at: Callable[[int], float | None] = lambda workers: None,
) -> Balance | None:
    """Where the chosen count of workers (with one process or none: the most the caps allow,
    `cap`, no more than the objects per rank) is dealt the objects unevenly at a cost beyond
    the noise: the smallest count above it that deals them evenly (a divisor of the objects per
    rank, at most one each), where the RAM allows it (`ram_cap`) and it gains more than the
    noise over the chosen count's rate; else, where the chosen count itself is dealt unevenly,
    a re-shard into a multiple of its readers. None: neither gains.

    `steady_at(workers)`: the lowest ceiling the trial measured at that count with all of them
    busy (`bottleneck.measured_steady`), where it measured it: the cost and the counts above are
    then priced from it and one worker's rate alone (`loop_rate`); else (None) by the model."""
    chosen = int(state.get(Key.NUM_WORKERS, 0))
    objects = dealing(ctx, state, 1).objects
    # one process reads every object: the counts above it, as many as the caps allow, decide
    most = chosen if chosen >= 2 else min(cap, objects)
    dealt = dealing(ctx, state, most)
    if most < 2 or most > objects or dealt.even:  # workers with none: COST-5's
        return None
    steady = steady_at(most)
    if steady is None and ctx.model(state, most).bottleneck != "objects":
        return None
    if steady is not None and dealt_ceiling(ctx, state, most, steady) is None:
        return None
    before = ctx.expected_rate(state)
    measured = chosen in ctx.measured_rates(state)
    count = next(b for b in range(most + 1, objects + 1) if objects % b == 0)
    if count <= min(ram_cap, MAX_SEARCH_WORKERS):
        predicted = loop_rate(ctx, state, count, steady)
        if predicted > (1 + NOISE_CAP) * before:
            return Balance(dealt, count, None, predicted, before, measured)
    if chosen < 2:
        return None
    shards, after = _reshard(ctx, state, chosen, steady)
    if shards is None or after <= (1 + NOISE_CAP) * before:
        return None
    return Balance(dealt, None, shards, after, before, measured)


def _reshard(
    ctx: Context, state: State, workers: int, steady: float | None
) -> tuple[int | None, float]:
    """(shards, the loop's samples/s after) for a re-shard into a multiple of the readers
    (ranks x `workers`). A re-shard packs whole samples: no more shards than the epoch's
    samples (None where they are fewer than the readers), and at best the busiest worker reads
    an even share of a rank's samples rounded up, so the epoch is priced as the samples dealt
    one by one (`epoch_rate`, from the start the model takes), with every worker busy at the
    even rate (`loop_rate`)."""
    _, spo = ctx.layout(state)
    objects = ctx.objects_read(state)
    samples = math.floor(objects * spo)
    readers = ctx.ranks * workers
    shards = math.ceil(objects / readers) * readers
    if shards > samples:
        shards = samples // readers * readers
    if shards < readers:
        return None, 0.0
    busy = loop_rate(ctx, state, workers, steady, even=True)
    alone = one_process_rate(ctx, state, workers)
    start = epoch_start_s(ctx.read_storage(state), ctx.costs(state, workers))
    per_rank = dealing(ctx, state, workers).objects * spo
    return shards, min(busy, epoch_rate(busy, alone, workers, per_rank, 1.0, start))


def loop_rate(
    ctx: Context, state: State, workers: int, steady: float | None, even: bool = False
) -> float:
    """The loop's samples/s with `workers` over whole epochs, the objects dealt as they are (or
    `even`ly, as after a re-shard), no more than the consumer takes: from `steady`, the lowest
    ceiling measured with every worker busy (more workers share the same cores), and one
    worker's rate alone (`epoch_rate`); else (None) the model's."""
    consumer = ctx.consumer_rate or math.inf
    if steady is None:
        at = ctx.model(state, workers)
        if not even:
            return at.trained_samples_per_s
        # the step's hold on the loop, where it already holds it under the loader
        step = at.trained_samples_per_s if at.trained_samples_per_s < at.samples_per_s else consumer
        return min(at.latency_bound, at.cpu_bound, at.bandwidth_bound, step, consumer)
    alone = one_process_rate(ctx, state, workers)
    busy = min(steady, alone * workers)
    if not even:
        _, spo = ctx.layout(state)
        start = epoch_start_s(ctx.read_storage(state), ctx.costs(state, workers))
        busy = epoch_rate(busy, alone, workers, dealing(ctx, state, workers).objects, spo, start)
    return min(busy, consumer)


def balance_words(ctx: Context, state: State, found: Balance) -> str:
    """NW-5's rationale: the dealing, what balances it, and the predicted gain."""
    chosen = int(state.get(Key.NUM_WORKERS, 0))
    dealt, unit = found.dealt, found.dealt.unit
    with_chosen = counted(chosen, "worker") if chosen else "no workers"
    how = "measured" if found.measured else "predicted"
    gain = f"+{found.gain:.0%} over the {rate(found.before)} {how} with {with_chosen}"
    model = "the model, from the trial's measured costs," if ctx.trial else "the model"
    readers = ctx.ranks * dealt.processes
    text = dealt.words()
    if dealt.processes != chosen:
        text += f" ({dealt.processes}: the most workers the cores and memory allow)"
    text = f"{text[:1].upper()}{text[1:]}."
    if found.workers is not None:
        cores = ctx.cores_per_rank
        above = (
            f" ({counted(found.workers, 'worker')} on {counted(cores, 'core')}: the model "
            f"counts the cores they share, which no longer idle through the last {unit}; "
            "torch's warning of more workers than CPUs does not hold here)"
            if found.workers > cores
            else ""
        )
        return (
            f"{text} num_workers={found.workers} deals them evenly "
            f"({dealt.objects // found.workers} each): {model} predicts "
            f"{rate(found.predicted)}, {gain}{above}. Or re-shard into a multiple of "
            f"{readers} {unit}s (ranks x {counted(dealt.processes, 'worker')})."
        )
    assert found.shards is not None
    return (
        f"{text} No count the cores and memory allow deals them evenly: re-shard into a "
        f"multiple of {readers} {unit}s (ranks x workers), e.g. {found.shards} of "
        f"{data_size(ctx.total_bytes / found.shards)}: with every worker busy to the epoch's "
        f"end {model} predicts {rate(found.predicted)}, {gain}."
    )

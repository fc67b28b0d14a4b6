"""How an epoch's objects are dealt to a rank's loader processes, and what an uneven dealing
costs.

The datasets deal an epoch's objects (shards) whole, in turn, to the readers, ranks x workers
(`S3IterableDataset.shard`, native_loader/datasets.py). Where the objects per rank are no
multiple of the workers, some are dealt one more than the others, and each epoch ends with
those reading alone while the rest idle. The model's `epoch_rate` prices it: an epoch lasts at
least its samples at the rate of every process busy, and at least the busiest process's
samples at the rate one process reads alone. The bottleneck (`dealt_ceiling`) prices it from
the trial's measured ceilings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.core.model import epoch_rate
from advisor.core.units import counted, duration, rate
from advisor.decide.rules.context import Context
from advisor.decide.rules.keys import State
from advisor.decide.rules.thresholds import NOISE_CAP


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
    start = ctx.read_storage(state).first_byte_s
    over_epochs = epoch_rate(busy, alone, workers, dealt.objects, spo, start)
    if over_epochs >= (1 - NOISE_CAP) * busy:
        return None
    return DealtCeiling(over_epochs, busy, alone, dealt)

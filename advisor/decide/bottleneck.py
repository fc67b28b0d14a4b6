"""What limits the loader, named from measurements: storage, decode or transform, collate or
transfer between processes, the cores, or the shards' dealing; or nothing the loader does (the
step).

A stage limits the loader when the measured rate reaches `BOTTLENECK_SHARE` of the stage's
ceiling, the samples/s its measured cost allows. Where several do, the one whose ceiling lies
nearest the measured rate is named; where none does, that is said rather than guessed.

- With a trial (`of_trial`), at the recommended num_workers: the rate the sweep measured there
  against the storage probe's best objects/s (x samples per object; a curve that still rose
  is a lower bound on the ceiling, which names nothing), the loading cores over the decode
  loop's CPU per sample, one training thread over its CPU per sample taking the workers'
  batches, and the usable cores over the busy CPU per sample the sweep measured. Those hold
  with every worker busy; where an epoch's shards are dealt unevenly, each epoch ends with the
  busiest workers reading alone: the lowest of them over whole epochs (`epoch_rate`, from one
  worker's rate alone as the model has it from the measured costs) is the dealing's ceiling
  (`advisor.decide.facts.dealing`).
- With the user's own loop (`of_loop`, no trial): the loader's CPU per sample times the rate
  the loop ran at is the cores its processes kept busy. Over the usable cores, or over the
  processes that load (the workers, or with none the main process while it waits), that is the
  same share of a ceiling: a loop that waits while its loader keeps the cores (or its
  processes) busy is CPU-bound; one that waits while they idle waits on storage or the network.
  A loop under the verdict's 5% wait is not input-bound. Where the loader idles but the cores
  were busy over the loop (at least `BOTTLENECK_SHARE` of them, other work included), nothing
  is named: waiting on storage and being starved of CPU read the same in these figures.

Plain data (a frozen dataclass) so the recommendation, the diagnosis, `--json` and the
headlines carry the same finding.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from advisor.core.model import loading_cores
from advisor.core.units import counted, duration, rate, share
from advisor.decide.facts.dealing import dealt_ceiling
from advisor.decide.keys import Key, State
from advisor.decide.thresholds import BOTTLENECK_SHARE, NOISE_CAP
from advisor.decide.verdict import INPUT_BOUND
from advisor.decide.words import workers as workers_words
from advisor.measure.trial.cpu_parts import busy_parts, parts_words
from advisor.measure.trial.results import READ_LISTED
from advisor.measure.trial.search import measured_ceiling

if TYPE_CHECKING:
    from advisor.decide.facts.context import Context
    from advisor.measure.loop.results import LoopSummary

# NVML's utilisation is the share of time a kernel ran. A loop that does not wait for data
# while its GPU runs kernels under half the time spends the rest of each step on the host (seen
# on an H100: a ResNet-18 step resizing each image in Python kept the GPU busy 13%).
GPU_BUSY_STEP = 0.5
Stage = Literal[
    "storage", "decode", "handover", "cores", "shards", "step", "workers", "unexplained"
]
STAGE_WORDS: dict[str, str] = {
    "storage": "storage",
    "decode": "decode or transform",
    "handover": "collate or transfer between processes",
    "cores": "cores",
    "shards": "shard dealing",
    "step": "the training step (not input-bound)",
    "workers": "too few workers (more were not measured)",
    "unexplained": "no measured stage",
}
CPU_STAGES = ("decode", "cores")  # the stages that less CPU per sample relieves


@dataclass(frozen=True)
class Ceiling:
    """One stage's measured ceiling: the samples/s its cost allows, and how it was derived.
    `lower_bound`: the stage served more the more it was asked (never named as the limit)."""

    stage: str
    samples_per_s: float
    how: str
    lower_bound: bool = False

    def near(self, measured: float) -> bool:
        """The measured rate reaches BOTTLENECK_SHARE of this ceiling."""
        return not self.lower_bound and measured >= BOTTLENECK_SHARE * self.samples_per_s


@dataclass(frozen=True)
class Bottleneck:
    """The limiting stage (`Stage`), the rate it was judged at, every stage's ceiling, and the
    one-line reason. `origin`: "trial" (the sweep at the recommended count) or "loop" (the
    user's own loop)."""

    stage: Stage
    measured_samples_per_s: float | None
    ceilings: tuple[Ceiling, ...]
    reason: str
    origin: str
    # the lines that decide the stage (the step's rate, a ceiling's BOTTLENECK_SHARE) which the
    # measured count's slices lie on both sides of: a repeat may name another stage
    within_noise: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        return STAGE_WORDS[self.stage]

    @property
    def line(self) -> str:
        return f"bottleneck: {self.words}: {self.reason}"

    def contradicts_cpu_advice(self) -> bool:
        """True when the measurements name a limit that less CPU per sample does not lift."""
        return self.stage not in CPU_STAGES

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Bottleneck:
        ceilings = tuple(Ceiling(**c) for c in data.get("ceilings", ()))
        close = tuple(data.get("within_noise", ()))
        return cls(**{**data, "ceilings": ceilings, "within_noise": close})


def name_stage(
    measured: float, ceilings: list[Ceiling], consumer_rate: float | None
) -> tuple[Stage, Ceiling | None]:
    """The step when the loader keeps up with the consumer (within NOISE_CAP, as MEAS-3 reads
    it); else the stage whose ceiling the measured rate reaches and lies nearest; else none."""
    if consumer_rate is not None and measured >= consumer_rate * (1 - NOISE_CAP):
        return "step", None
    near = [c for c in ceilings if c.near(measured) and c.samples_per_s > 0]
    if not near:
        return "unexplained", None
    nearest = min(near, key=lambda c: _distance(measured, c))
    return nearest.stage, nearest  # type: ignore[return-value]


def straddled(
    low: float, high: float, ceilings: list[Ceiling], consumer_rate: float | None
) -> tuple[str, ...]:
    """The lines `name_stage` decides by that a count's slices, `low` to `high`, lie on both
    sides of: the step's rate (keeping up within NOISE_CAP) and each ceiling's
    BOTTLENECK_SHARE. Named in words with their samples/s."""
    lines = []
    if consumer_rate is not None:
        words = f"keeping up with the {rate(consumer_rate)} step, within {share(NOISE_CAP)}"
        lines.append((consumer_rate * (1 - NOISE_CAP), words))
    for c in ceilings:
        if not c.lower_bound and c.samples_per_s > 0:
            line = BOTTLENECK_SHARE * c.samples_per_s
            lines.append((line, f"{share(BOTTLENECK_SHARE)} of the {c.stage} ceiling"))
    return tuple(f"{rate(line)} ({words})" for line, words in lines if low < line <= high)


def _distance(measured: float, ceiling: Ceiling) -> float:
    return abs(math.log(measured / ceiling.samples_per_s))


def exceeded(measured: float, ceilings: list[Ceiling]) -> tuple[list[Ceiling], list[Ceiling]]:
    """(the ceilings the measured rate respects, those it exceeds beyond the noise): a ceiling
    under what was measured was estimated wrong (its cost measured on a busier machine, or
    its cores miscounted), and nothing is judged by it."""
    kept = [c for c in ceilings if measured <= c.samples_per_s * (1 + NOISE_CAP)]
    return kept, [c for c in ceilings if c not in kept]


def unmeasured_room(ctx: Context, state: State, workers: int) -> Ceiling | None:
    """The measured ceiling that leaves room above `workers` where no count above it was
    measured within the caps: the lowest one at that count (the cores over the busy CPU per
    sample there, the storage where its probe saturated) that the measured rate lies more than
    the noise under, and that it does not exceed. None: a count above was measured, the caps
    allow none, the consumer's rate is reached, or the ceilings leave no room."""
    trial, counts = ctx.trial, ctx.measured_counts(state)
    cap = int(state.get(Key.WORKERS_CAP_CORES, ctx.cores_per_rank))
    cap = min(cap, int(state.get(Key.WORKERS_CAP_RAM, cap)))
    if trial is None or workers not in counts or workers >= cap:
        return None
    if any(workers < w <= cap for w in counts):
        return None
    rate_at = counts[workers].median
    consumer = ctx.consumer_rate
    if consumer is not None and rate_at >= consumer * (1 - NOISE_CAP):
        return None
    _, spo = ctx.layout(state)
    ceiling = measured_ceiling(
        trial.sweep, workers, cores=max(ctx.cores_per_rank, 1),
        storage=trial.storage if trial.setup is None or trial.setup.read_path == READ_LISTED
        else None, spo=spo,
    )  # fmt: skip
    if ceiling is None or not rate_at < (1 - NOISE_CAP) * ceiling:
        return None
    how = f"the cores' busy CPU per sample and the storage as measured at {workers_words(workers)}"
    return Ceiling("cores", ceiling, how)


def trial_ceilings(ctx: Context, state: State, num_workers: int) -> list[Ceiling]:
    """Each stage's ceiling at `num_workers`, from what the trial measured (where it did)."""
    trial = ctx.trial
    assert trial is not None
    out: list[Ceiling] = []
    probe = trial.storage
    read_path = trial.setup.read_path if trial.setup is not None else READ_LISTED
    _, spo = ctx.layout(state)
    if probe is not None and probe.best_objects_s > 0 and read_path == READ_LISTED:
        best = max(probe.concurrency_curve, key=lambda level: level[2])
        out.append(Ceiling(
            "storage", probe.best_objects_s * spo,
            f"{probe.best_objects_s:,.1f} objects/s at {best[0]} requests at once "
            f"x {spo:,.1f} samples/object" + ("" if probe.saturated else ", still rising"),
            lower_bound=not probe.saturated,
        ))  # fmt: skip
    decode = trial.decode
    if decode is not None:
        cpu = decode.loop_cpu_s_per_sample or decode.cpu_s_per_sample
        cores = loading_cores(
            num_workers, ctx.cores_per_rank, ctx.training_share(state, num_workers)
        )
        if cpu > 0:
            out.append(Ceiling(
                "decode", cores / cpu,
                f"{counted(cores, 'loading core')} / {duration(cpu)} CPU per sample",
            ))  # fmt: skip
    main_s = trial.main_thread_s(num_workers) if num_workers > 0 else None
    if main_s:
        out.append(Ceiling(
            "handover", 1 / main_s, f"1 training thread / {duration(main_s)} CPU per sample taken"
        ))  # fmt: skip
    machine_s = trial.machine_s(num_workers)
    if machine_s:
        cores = max(ctx.cores_per_rank, 1)
        parts = parts_words(busy_parts(trial, num_workers))  # what the busy CPU is spent on
        how = f"{counted(cores, 'core')} / {duration(machine_s)} busy CPU per sample: {parts}"
        out.append(Ceiling("cores", cores / machine_s, how))
    return out


def measured_steady(ctx: Context, state: State, workers: int) -> float | None:
    """The lowest stage's ceiling the trial measured at `workers`, all of them busy (those
    the measured rate exceeds left out; lower bounds too). None: not measured, or none holds."""
    count = ctx.measured_counts(state).get(workers)
    if count is None or ctx.trial is None:
        return None
    kept, _ = exceeded(count.median, trial_ceilings(ctx, state, workers))
    return min((c.samples_per_s for c in kept if not c.lower_bound), default=None)


def of_trial(ctx: Context, state: State) -> Bottleneck | None:
    """The bottleneck at the chosen num_workers where the trial measured it for what training
    reads (None: not measured there). Ceilings the measured rate exceeds are left out and
    named; where the ceilings leave room above a count no higher count was measured at, the
    stage is "workers", not one a count above might relieve."""
    workers = int(state.get(Key.NUM_WORKERS, 0))
    count = ctx.measured_counts(state).get(workers)
    if count is None or ctx.trial is None:
        return None
    measured = count.median
    ceilings, wrong = exceeded(measured, trial_ceilings(ctx, state, workers))
    dealt = dealt_ceiling(ctx, state, workers, measured_steady(ctx, state, workers))
    if dealt is not None:  # the stages' ceilings hold with every worker busy: not all epoch
        kept, over = exceeded(measured, [Ceiling("shards", dealt.samples_per_s, dealt.how)])
        ceilings, wrong = ceilings + kept, wrong + over
    dropped = "".join(
        f"; left out: the {c.stage} ceiling of {rate(c.samples_per_s)} ({c.how}), under the "
        "measured rate, was estimated wrong"
        for c in wrong
    )
    at = f"{rate(measured)} measured with {workers_words(workers)}"
    room = unmeasured_room(ctx, state, workers)
    stage, nearest = name_stage(measured, ceilings, ctx.consumer_rate)
    close = straddled(count.low, count.high, ceilings, ctx.consumer_rate)
    noise = ""
    if close:
        noise = (
            f"; within the noise: its slices read {rate(count.low)} to {rate(count.high)}, "
            f"on both sides of {' and '.join(close)}, so a repeat may name another stage"
        )
    if room is not None and stage != "step":
        reason = (
            f"{at}, the most measured; no count above it was measured, and the measured "
            f"ceilings allow {rate(room.samples_per_s)} ({room.how}): more workers may read "
            f"faster, which a longer trial measures{dropped}{noise}"
        )
        return Bottleneck("workers", measured, tuple(ceilings), reason, "trial", close)
    rivals = [
        c.stage
        for c in ceilings
        if nearest is not None
        and c is not nearest
        and c.near(measured)
        and abs(_distance(measured, c) - _distance(measured, nearest)) <= NOISE_CAP
    ]
    tie = f"; {' and '.join(rivals)} lies within the noise of it" if rivals else ""
    if stage == "step":
        reason = (
            f"{at}, what the {rate(ctx.consumer_rate or 0)} step takes: it waits for the GPU{noise}"
        )
    elif nearest is not None:
        reason = (
            f"{at}, {share(measured / nearest.samples_per_s)} of its ceiling ({nearest.how})"
            f"{tie}{dropped}{noise}"
        )
    else:
        listed = "; ".join(f"{c.stage} {rate(c.samples_per_s)}" for c in ceilings) or "none"
        reason = (
            f"{at} is under {share(BOTTLENECK_SHARE)} of every measured ceiling ({listed}): "
            f"the limit is elsewhere (e.g. how many reads run at once, or the loop itself)"
            f"{dropped}{noise}"
        )
    return Bottleneck(stage, measured, tuple(ceilings), reason, "trial", close)


def of_loop(
    summary: LoopSummary,
    usable_cores: float,
    workers: int | None = None,
    machine_busy: float | None = None,
) -> Bottleneck | None:
    """The bottleneck of the user's own loop (see the module docstring). `workers`: the
    loader's num_workers where it is a DataLoader (None: not known). `machine_busy`: the share
    of the usable cores busy with anything over the loop (None: not measured): a loader whose
    processes idle while the cores are that busy may wait on storage or be starved of CPU by
    other work (its wall time stretched past its CPU time), so nothing is named. None: no waits
    measured."""
    waits, measured = summary.overall_wait_share, summary.overall_samples_per_s
    if waits is None or measured is None:
        return None
    if waits <= INPUT_BOUND:
        reason = f"{share(waits)} of each step waits for data (under {share(INPUT_BOUND)})"
        gpu = summary.gpu_utilization
        if gpu is not None and gpu.median < GPU_BUSY_STEP * 100:
            reason += (
                f"; yet the GPU ran kernels only {gpu.median:.0f}% of the time (NVML): the "
                "step's host side (its Python, kernel launches, copies, synchronisations) sets "
                "the pace, not the GPU's compute"
            )
        return Bottleneck("step", measured, (), reason, "loop")
    cpu = summary.loader_cpu_s_per_sample
    if cpu is None or cpu < 0:
        reason = f"{share(waits)} of each step waits; the loader's CPU was not measured"
        return Bottleneck("unexplained", measured, (), reason, "loop")
    cores = max(usable_cores, 1)
    busy = measured * cpu
    ceilings: list[Ceiling] = []
    if cpu > 0:  # a loader measured at no CPU (one that sleeps) has no CPU ceiling: it idles
        how = f"{duration(cpu)} CPU per sample"
        ceilings.append(Ceiling("cores", cores / cpu, f"{counted(cores, 'core')} / {how}"))
        if workers is not None and workers > 0:  # they load all along
            label = counted(workers, "worker")
            ceilings.append(Ceiling("decode", workers / cpu, f"{label} / {how}"))
        elif workers is not None and measured > 0:
            # with none the main process loads only while the loop waits, so it spends no more
            # than the wait per sample on it: CPU beyond that ran on its reader's threads,
            # beside the step
            own = min(cpu, waits / measured)
            label = f"the main process {share(waits)} of the time"
            ceilings.append(Ceiling("decode", waits / own, f"{label} / {duration(own)} a sample"))
    ceilings, wrong = exceeded(measured, ceilings)
    dropped = "".join(
        f"; left out: the {c.stage} ceiling of {rate(c.samples_per_s)} ({c.how}), under the "
        "measured rate, was estimated wrong"
        for c in wrong
    )
    stage, nearest = name_stage(measured, ceilings, None)
    if nearest is not None:
        reason = (
            f"{share(waits)} of each step waits while the loader keeps {cores_busy(busy)} "
            "cores busy, "
            f"{share(measured / nearest.samples_per_s)} of its ceiling ({nearest.how}){dropped}"
        )
        return Bottleneck(stage, measured, tuple(ceilings), reason, "loop")
    idle = (
        f"{share(waits)} of each step waits while the loader keeps only {cores_busy(busy)} of "
        f"{counted(cores, 'core')} busy"
    )
    if machine_busy is not None and machine_busy >= BOTTLENECK_SHARE:
        reason = (
            f"{idle}, but the cores were {share(machine_busy)} busy: it waits on storage, or "
            f"other work starves it of CPU, which these figures cannot tell apart{dropped}"
        )
        return Bottleneck("unexplained", measured, tuple(ceilings), reason, "loop")
    if workers is None:
        reason = f"{idle}; its processes are not known{dropped}"
        return Bottleneck("unexplained", measured, tuple(ceilings), reason, "loop")
    reason = f"{idle}: its processes mostly idle, it waits on storage or network latency{dropped}"
    return Bottleneck("storage", measured, tuple(ceilings), reason, "loop")


def cores_busy(cores: float) -> str:
    """Cores kept busy on average, for people: "1.9", "under 0.1"."""
    return "under 0.1" if cores < 0.05 else f"{cores:.1f}"

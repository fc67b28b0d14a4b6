"""The change a measured loop is advised (`advisor.decide.judge` picks, of more workers and
persistent workers, the one with the larger predicted gain), and its proof where the changed
loader was swapped in during the run (`advisor.watch`).

More workers are predicted by the throughput model (`advisor.core.model.predict`, the one
`recommend` uses), fed with what the loop measured (`advisor.decide.facts.costs.loop_costs`):
the loader's CPU per sample (the process tree's CPU less the training thread's in its steps),
each loading process's time per sample (its loading processes share the loop's rate; with no
workers, the training process loads while it waits), the step's own rate (samples per step
time: the rate with loading free) and the share of it on the CPU, what a batch costs to cross
from a worker (the training thread's CPU taking the workers' batches over, and the timed wait
for a ready batch of as many tensors), and the data set's shards as the epoch's objects.
Persistent workers are predicted over whole epochs, as the model's `epoch_rate` takes an
epoch: a start, then its samples at the steady rate; the start measured in the loop becomes
one batch.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any

from advisor.core.model import choose_workers, predict
from advisor.core.units import counted, duration, rate, share
from advisor.decide.bottleneck import Bottleneck
from advisor.decide.facts.costs import loop_costs
from advisor.decide.thresholds import NOISE_CAP
from advisor.decide.verdict import INPUT_BOUND
from advisor.measure.loop.handover import Handover
from advisor.measure.loop.results import LoopRun, LoopSummary
from advisor.measure.loop.watch import LoaderFacts


@dataclass(frozen=True)
class Change:
    """One setting to change, with what the loop measured and what it is predicted to read
    after the change, in the same terms: the steady rate over the steps (each epoch's first
    batch left out: `steady_rate`) for `num_workers`, the rate over whole epochs, each epoch's
    first batch included, for `persistent_workers`."""

    setting: str
    now: Any
    to: Any
    measured_samples_per_s: float
    measured_wait_share: float
    predicted_samples_per_s: float
    predicted_wait_share: float
    line: str


@dataclass(frozen=True)
class Proof:
    """The change, swapped in during the run: what the model predicted for it beside what the
    loop measured before it and after it (rates in samples/s, waits as shares of each step)."""

    change: Change
    before_samples_per_s: float
    before_wait_share: float
    after_samples_per_s: float | None
    after_wait_share: float | None
    line: str


def proof(change: Change, after: LoopRun, workers: int | None) -> Proof:
    """The prediction beside the measurements: before the change, what the change was
    predicted against; after it, the changed loader in the same terms: for more workers its
    steady rate (`steady_rate`), for kept workers (`persistent_workers`) its rate over whole
    epochs, their one start left out (the first batch of each of its `workers`)."""
    was, waited = change.measured_samples_per_s, change.measured_wait_share
    if change.setting == "persistent_workers":  # whole epochs: their starts stay in
        kept = dataclasses.replace(after, epoch_starts=())
        now, waits = steady_rate(kept, skip=max((workers or 1) - 1, 0))
    else:
        now, waits = steady_rate(after)
    said = (
        f"{change.setting} {change.now} -> {change.to}, swapped in during this run: predicted "
        f"{rate(change.predicted_samples_per_s)} waiting {share(change.predicted_wait_share)} "
        "of each step; "
    )
    if not now or waits is None:
        said += "not measured yet after it"
    else:
        said += (
            f"measured {rate(now)} waiting {share(waits)} (before it {rate(was)} waiting "
            f"{share(waited)}): {now / was:.2f}x measured for "
            f"{change.predicted_samples_per_s / was:.2f}x predicted"
        )
    return Proof(change, was, waited, now or None, waits, said)


def step_rate(run: LoopRun) -> float | None:
    """Samples/s of the step alone (the loop's rate with loading free)."""
    if not run.step_s:
        return None
    step = statistics.median(run.step_s)
    per_batch = statistics.fmean(run.samples) if run.samples else 0.0
    return per_batch / step if step > 0 else None


def steady_rate(run: LoopRun, skip: int = 0) -> tuple[float | None, float | None]:
    """The loop's samples/s and waiting share over its steps, each epoch's first batch left
    out (the run's first is no step; a later epoch's waits for the epoch's start), and also
    the first `skip` steps; (None, None) where nothing is left."""
    left_out = set(run.epoch_starts) | set(range(skip))
    kept = [i for i in range(len(run.wait_s)) if i not in left_out]
    waited = sum(run.wait_s[i] for i in kept)
    looped = waited + sum(run.step_s[i] for i in kept)
    if looped <= 0:
        return None, None
    return sum(run.samples[i] for i in kept) / looped, waited / looped


def predicted_gain(change: Change) -> float:
    return change.predicted_samples_per_s / change.measured_samples_per_s


def more_workers_change(
    run: LoopRun,
    summary: LoopSummary,
    found: Bottleneck | None,
    facts: LoaderFacts | None,
    cores: float,
    free: float,
    handover: Handover | None,
) -> Change | None:
    """More workers, where the loop waits, the loader is a DataLoader and a count within the
    cores is predicted to read faster beyond the noise, on the cores other work left (`free`).

    The rates are the steady loop's (`steady_rate`): an epoch's first batch waits for the
    epoch's start (nothing in flight then, and without persistent workers their start),
    whatever the count."""
    measured, waits = steady_rate(run)
    consumer = step_rate(run)
    if (
        facts is None
        or facts.num_workers is None
        or measured is None
        or waits is None
        or waits <= INPUT_BOUND
        or consumer is None
        or found is None
        or found.stage == "cores"
    ):
        return None
    now = facts.num_workers
    # a data set of fewer shards than workers gives the workers above its shards nothing to
    # read: the loop measured the ones that read
    loading = min(now, facts.shards) if facts.shards is not None else now
    measured_loading = loop_costs(run, summary, now, loading, measured, waits, handover)
    if measured_loading is None:
        return None
    cpu, costs = measured_loading.cpu_s_per_sample, measured_loading.costs
    per_process = 1 / costs.process_s if costs.process_s else math.inf

    def predicted(count: int) -> float:
        # the shards are the epoch's objects: the model deals them whole to the workers; the
        # loop knows no object sizes, and its processes' measured time stands for the storage
        return predict(
            count, object_bytes=0.0, cpu_s_per_sample=cpu, usable_cores=free,
            consumer_rate=consumer, epoch_objects=facts.shards, costs=costs,
        ).trained_samples_per_s  # fmt: skip

    counts = range(now + 1, max(math.ceil(cores - 1e-9), 1) + 1)
    options = {w: r for w in counts if (r := predicted(w)) > measured * (1 + NOISE_CAP)}
    if not options:
        return None
    # of the counts faster beyond the noise, the fewest that keep up with the step, else the
    # fewest within the noise of the most (workers above the shards read no faster)
    best = choose_workers(options, consumer * (1 - NOISE_CAP), headroom=1.0, tolerance=NOISE_CAP)
    to_rate = options[best]
    wait_after = max(0.0, 1 - to_rate / consumer)
    return Change(
        "num_workers", now, best, measured, waits, to_rate, wait_after,
        f"num_workers {now} -> {best}: the model predicts {rate(to_rate)} (now "
        f"{rate(measured)}), waiting {share(wait_after)} of each step (now {share(waits)}); "
        f"from {duration(cpu)} of loader CPU per sample, {rate(per_process)} per loading "
        f"process and a step that takes {rate(consumer)}"
        + (f", on the {free:.1f} of {cores:g} cores other work left" if free < cores - 0.05
           else ""),
    )  # fmt: skip


def persistent_workers_change(
    run: LoopRun, summary: LoopSummary, facts: LoaderFacts | None
) -> Change | None:
    """persistent_workers=True, where the workers start anew every epoch and their start is
    worth changing beyond the noise. An epoch's first batch from each worker waits for that
    worker's start (its process, the data set's copy, `worker_init_fn`); with the workers kept,
    they wait for one batch a worker makes at the loop's rate (an upper bound where it idles)
    and then for the steady wait."""
    if (
        facts is None
        or not facts.num_workers
        or facts.persistent_workers
        or not run.samples
        or not summary.overall_samples_per_s
        or summary.seconds <= 0
    ):
        return None
    workers = facts.num_workers
    one_batch = workers * statistics.fmean(run.samples) / summary.overall_samples_per_s
    steady = statistics.median(run.wait_s)
    saved = sum(
        max(sum(firsts) - one_batch - (len(firsts) - 1) * steady, 0.0)
        for firsts in run.epoch_start_waits(workers)
    )
    waited = run.time_to_first_batch_s + sum(run.wait_s)
    measured, seconds_after = summary.samples / summary.seconds, summary.seconds - saved
    predicted = summary.samples / seconds_after
    if predicted <= measured * (1 + NOISE_CAP):
        return None
    epochs = len(run.epoch_starts) + 1
    return Change(
        "persistent_workers", False, True, measured, waited / summary.seconds, predicted,
        (waited - saved) / seconds_after,
        f"persistent_workers False -> True: predicted {rate(predicted)} over whole epochs "
        f"(now {rate(measured)}): starting the {counted(workers, 'worker')} anew cost "
        f"{duration(saved / epochs)} of waiting an epoch"
        + (f" (over {epochs})" if epochs > 1 else "")
        + f"; workers kept up make the first batch in {duration(one_batch)}",
    )  # fmt: skip

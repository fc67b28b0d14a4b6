"""What was measured of the loading, as the throughput model takes it (`MeasuredCosts`): from a
trial (`trial_costs`, for `recommend`'s rules) and from a training loop (`loop_costs`, for the
loop's judge). Which measurement fills which cost is decided here; which cost the model
prefers where several are given is the model's (`MeasuredCosts.thread_s`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.core.model import MeasuredCosts
from advisor.measure.loop.results import LoopRun, LoopSummary
from advisor.measure.trial.results import TrialResult

if TYPE_CHECKING:  # its module starts torch, which the wizard's first view must not wait for
    from advisor.measure.loop.handover import Handover


def trial_costs(
    trial: TrialResult | None,
    num_workers: int,
    *,
    as_trialled: bool,
    packed_cpu: bool,
    listed: bool,
    core_speed: float = 1.0,
) -> MeasuredCosts:
    """The costs the trial measured for `num_workers`, on cores `core_speed` times as fast as
    this machine's: the loader process's Python work (the decode loop) and, with workers, the
    samples' hand-over from a worker (its probe: what crosses is the transform's output,
    wherever it was read from); where training reads what the trial read on this machine
    (`as_trialled`), the training thread's, a worker's and the machine's with this kind of
    count (the sweep), the training thread's also where the trial swept a packed sample of
    what training streams (`packed_cpu`); and where training reads the listed objects
    (`listed`) as trialled, the wait for an epoch's first sample: the sweep's loader processes'
    own with this kind of count where their epochs started (a loop's start shares the cores
    with the last epoch's work and the loop's; the probe times one alone), else the decode
    probe's (else a first byte of the storage the model reads, such as a local copy the sweep
    read but the probe did not). Nothing without a trial or its decode probe."""
    decode = trial.decode if trial is not None else None
    if trial is None or decode is None:
        return MeasuredCosts()
    handover = trial.handover if num_workers > 0 else None
    main_s = handover.main_s_per_sample if handover is not None else None
    if as_trialled or packed_cpu:
        swept = trial.main_thread_s(num_workers)  # the sweep's, where it measured the kind
        if swept is not None or handover is None:
            main_s = swept
    handover_s = handover.worker_s_per_sample if handover is not None else None
    machine_s = worker_s = start_s = None
    if as_trialled:
        machine_s, worker_s = trial.machine_s(num_workers), trial.worker_s(num_workers)
        if handover is None:  # a result from before the hand-over probe: the sweep's estimate
            handover_s = trial.worker_handover_s(num_workers)
        if listed:  # the loop's own wait where its epochs started, else the probe's start
            swept_start = trial.epoch_start_s(num_workers)
            start_s = swept_start if swept_start is not None else decode.start_s
    return MeasuredCosts(
        overhead_s=decode.overhead_s,
        main_s=main_s,
        machine_s=machine_s,
        handover_s=handover_s,
        worker_s=worker_s,
        epoch_start_s=start_s,
    ).on_cores(core_speed)


@dataclass(frozen=True)
class LoopLoading:
    """What a training loop measured of its loading, for `predict`: the loader's CPU per
    sample beyond taking batches over (`cpu_s_per_sample`), and the costs."""

    cpu_s_per_sample: float
    costs: MeasuredCosts


def loop_costs(
    run: LoopRun,
    summary: LoopSummary,
    num_workers: int,
    loading_processes: int,
    rate: float,
    wait_share: float,
    handover: Handover | None,
) -> LoopLoading | None:
    """The loop's loading at `num_workers`, `loading_processes` of them reading (fewer where
    the data set has fewer shards), from its steady `rate` (samples/s) and the share of the
    time it waited (`wait_share`); None where the loop measured no loader CPU, or no rate.

    Each loading process's time per sample: the loading workers share the loop's rate; with
    none, the training process loads only while it waits. With workers, the training thread
    takes their batches over one after another between its steps: at least its CPU measured
    doing so, and the hand-over's timed wait for a ready batch (which also waits on the
    worker's reply for each tensor); the rest of the loader's CPU is the workers'. With none, a
    worker would also pickle each batch it makes. The step holds the training thread's core
    for the share of its time it ran on the CPU. The steady rate leaves each epoch's first
    batch out, so an epoch starts at once."""
    cpu = summary.loader_cpu_s_per_sample
    if cpu is None or rate <= 0:
        return None
    if loading_processes > 0:
        per_process = rate / loading_processes
    else:
        per_process = rate / max(wait_share, 1e-6)
    per_batch = statistics.fmean(run.samples) if run.samples else 1.0
    send = take = None
    if handover is not None and per_batch > 0:
        send, take = handover.send_s / per_batch, handover.take_s / per_batch
    receive, worker = take, None
    if num_workers > 0 and run.fetch_cpu_s is not None and run.total_samples > 0:
        fetched = min(run.fetch_cpu_s / run.total_samples, cpu)
        receive, cpu = max(fetched, take or 0.0), cpu - fetched
    elif num_workers == 0 and send is not None:
        worker = cpu + send
    stepped = sum(run.step_s)
    held = min((run.step_cpu_s or 0.0) / stepped, 1.0) if stepped > 0 else 1.0
    costs = MeasuredCosts(
        main_s=receive,
        worker_s=worker,
        process_s=1 / per_process,
        step_cpu_share=held,
        epoch_start_s=0.0,
    )
    return LoopLoading(cpu, costs)

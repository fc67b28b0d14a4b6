"""What the num_workers decision says about the read path: what the trial measured on (a local
copy, a packed sample, the first epoch and the steady state), or why the model decides instead.
"""

from __future__ import annotations

from advisor.core.units import rate
from advisor.decide.facts.context import Context
from advisor.decide.keys import State
from advisor.decide.words import another_setup, workers
from advisor.measure.trial.results import READ_LOCAL_COPY, READ_PACKED


def why_model(ctx: Context, state: State) -> str:
    """Why the model decides num_workers (NW-4) rather than the trial's measurements."""
    if ctx.trial is None:
        return "no trial ran"
    target = ctx.hardware.target
    if target is not None:
        return (
            f"the plan is for {target.name or 'the target machine'}, "
            f"{ctx.cores_per_rank:.3g} cores per rank, where the trial did not run: the model "
            "carries the costs per sample it measured here there"
        )
    if ctx.hardware.planned:
        return "the job runs on a planned machine (--target-gpu), not this one"
    if ctx.reads.trial_setup_changes:
        return another_setup(ctx.reads.trial_setup_changes)
    if ctx.reads.packed_cpu_measured(state):
        return (
            "training streams packed shards from where the trial cannot make them; the model "
            "takes the training thread's CPU per sample that the trial measured on a packed "
            "sample on local disk"
        )
    if ctx.reads.path(state) is None:
        return "training reads packed shards or a file system the trial could not make here"
    if not ctx.trial.counts:
        return "the trial measured no count"
    if ctx.reads.path(state) == READ_PACKED:
        return (
            "training reads packed shards, and the trial could not pack a sample of them (its "
            "notes say why)"
        )
    return (
        f"training reads {ctx.reads.path(state)} objects, and the trial could not measure that "
        "read path (its notes say why)"
    )


def first_epoch_rates(ctx: Context) -> dict[str, float] | None:
    """Median samples/s per num_workers the trial measured on what the first epoch reads, where
    that differs from the later epochs (S3 before the cache fills); None otherwise."""
    first = ctx.trial.first_epoch if ctx.trial is not None else None
    if first is None:
        return None
    return {str(c.num_workers): round(c.median, 1) for c in first.counts}


def read_path_rationale(ctx: Context, state: State) -> str:
    """What the measured count optimises: the read path of the job's steady state."""
    first = ctx.trial.first_epoch if ctx.trial is not None else None
    if ctx.reads.path(state) == READ_PACKED:
        return (
            " Measured on a packed sample: sampled objects packed into tar shards on local disk "
            "and read as tar samples, what training reads once the set is packed and copied."
        )
    if ctx.reads.path(state) != READ_LOCAL_COPY:
        return ""
    if first is None:
        return " Measured on a local copy of a sample: what training reads after the copy."
    best = first.best_count()
    first_rate = f"; the first epoch streams: {rate(best.median)}" if best else ""
    return (
        f" Measured on a local copy of a sample: it optimises the steady state, the "
        f"{ctx.workload.epochs - 1} of {ctx.workload.epochs} epochs that read the local cache"
        f"{first_rate} at best ({workers(best.num_workers) if best else 'none'}, measured)."
    )

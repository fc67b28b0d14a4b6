"""The job and the machine it runs on (PLAN-1..3): the job as a whole (its samples/s, what it
reads before the first batch across its nodes, each rank's share), whether a target node's
network carries what its ranks read, and what a plan for another machine rests on.
"""

from __future__ import annotations

import math

from advisor.core.reader_budget import first_batch_s
from advisor.core.units import counted, data_rate, data_size, duration, rate, share
from advisor.decide.facts.context import Context
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.words import workers
from native_loader.loader import DEFAULT_PREFETCH

# a node's network past this share of its bandwidth leaves no room for the job's other traffic
# (gradients, checkpoints) nor for a burst: the ranks' reads then set the pace
NETWORK_BUSY_SHARE = 0.8


def _machine_words(ctx: Context) -> str:
    target = ctx.hardware.target
    if target is None:
        return "this machine"
    return target.name or "the target machine"


class JobPlan(Rule):
    """The job as a whole.

    Condition: more than one rank (nodes x GPUs per node), or a target machine
    Recommendation: the job's samples/s (the ranks dealt an object x each rank's expected rate,
    against the ranks x the consumer rate: with fewer objects than ranks x workers the last
    ranks get none), each rank's share of an epoch, and what the job reads before its first
    batch: with a local copy, every node copying the whole set (nodes x its bytes and GETs, at
    the copy's rate: COST-2's figure); streaming, every loader process of every rank fetching
    its first batches (ranks x processes x prefetch x the objects of a batch, no more than an
    epoch's objects) and the model's time to the first batch, the processes of a node sharing
    its bandwidth
    Source: the expected rate (MEAS-1/2), the copy's rate (the trial's timed copy: COST-2), the
    model's first batch (advisor/core/reader_budget.py)
    """

    id = "PLAN-1"
    decision = DecisionKind.JOB
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        wl = ctx.workload
        if ctx.ranks == 1 and ctx.hardware.target is None:
            return None
        per_rank = float(state.get(Key.EXPECTED_SAMPLES_PER_S, 0.0))
        reading = _ranks_reading(ctx, state)
        job = per_rank * reading
        shape = (
            f"{counted(wl.nodes, 'node')} x {counted(ctx.ranks_per_node, 'rank')} on "
            f"{_machine_words(ctx)}"
        )
        text = f"The job: {shape}, {rate(job)} ({counted(reading, 'rank')} x {rate(per_rank)})"
        if ctx.consumer_rate is not None:
            text += f" against the {rate(ctx.consumer_rate * ctx.ranks)} its GPUs consume"
        if reading < ctx.ranks:
            text += (
                f". Only {reading} of the {ctx.ranks:,} ranks are dealt an object an epoch "
                f"({counted(ctx.objects_read(state), 'object')} dealt whole, in turn, to "
                "ranks x workers): the others' GPUs get nothing (COST-5). "
            )
        else:
            text += (
                f". Each rank reads 1/{ctx.ranks:,} of the set, about "
                f"{counted(round(ctx.samples_per_rank), 'sample')} an epoch. "
            )
        before, evidence = _before_first_batch(ctx, state)
        return self.finding(
            round(job, 1),
            text + before,
            evidence={
                "job_samples_per_s": round(job, 1),
                "ranks": ctx.ranks,
                "ranks_reading": reading,
                "samples_per_rank": round(ctx.samples_per_rank),
                **evidence,
            },
            measured=bool(ctx.measured_rates(state)),
        )


def _ranks_reading(ctx: Context, state: State) -> int:
    """The ranks dealt at least one object an epoch: the datasets deal whole objects in turn to
    the readers `rank x workers + worker`, so fewer objects than readers leave the last ranks
    none (COST-5 names them)."""
    processes = max(int(state.get(Key.NUM_WORKERS, 0)), 1)
    return min(ctx.ranks, math.ceil(ctx.objects_read(state) / processes))


def _before_first_batch(ctx: Context, state: State) -> tuple[str, dict[str, float]]:
    """What the whole job reads before its first batch, in words and figures."""
    nodes = ctx.workload.nodes
    if ctx.training_source(state) == "copy-local" and ctx.reads.in_s3:
        copy, seconds = ctx.copy_rate(), ctx.copy_seconds()
        objects = ctx.profile.object_count
        return (
            f"Before the first batch each node copies the whole set, {data_size(ctx.total_bytes)} "
            f"in {counted(objects, 'GET')}, about {duration(seconds)} at {copy.words}: "
            f"{data_size(nodes * ctx.total_bytes)} and {counted(nodes * objects, 'GET')} "
            f"across {counted(nodes, 'node')}.",
            {
                "first_batch_bytes": nodes * ctx.total_bytes,
                "first_batch_gets": nodes * objects,
                "first_batch_s": round(seconds, 1),
            },
        )
    w = int(state.get(Key.NUM_WORKERS, 0))
    processes = max(w, 1)
    batches = (state.get(Key.PREFETCH_FACTOR) or DEFAULT_PREFETCH) if w else 1
    object_bytes, spo = ctx.layout(state)
    per_batch = math.ceil(ctx.workload.batch_size / max(spo, 1.0))
    # the job reads no more than the objects an epoch deals, however many its workers ask for
    gets = min(ctx.ranks * processes * batches * per_batch, math.ceil(ctx.objects_read(state)))
    read = gets * min(object_bytes, ctx.workload.batch_size * object_bytes / max(spo, 1.0))
    seconds = first_batch_s(
        object_bytes=object_bytes, samples_per_object=spo, batch_size=ctx.workload.batch_size,
        cpu_s_per_sample=ctx.cpu_s_per_sample, storage=ctx.read_storage(state),
        streamed=ctx.streamed(state), processes=processes * ctx.ranks_per_node,
    )  # fmt: skip
    local = ctx.training_source(state) == "copy-local" or not ctx.reads.in_s3
    where, noun = ("from local files", "read") if local else ("at once", "GET")
    return (
        f"At the start {counted(ctx.ranks, 'rank')} x {workers(w)} ask for their first "
        f"{counted(batches, 'batch', 'batches')} {where}: about {counted(gets, noun)} "
        f"({data_size(read)}), the first batch after about {duration(seconds)} (predicted).",
        {
            "first_batch_gets" if not local else "first_batch_reads": gets,
            "first_batch_bytes": round(read),
            "first_batch_s": seconds,
        },
    )


class NodeNetwork(Rule):
    """The node's network against what its ranks read.

    Condition: a target machine with a network figure, and training reads over the network
    (streamed from S3, EFS or a shared file system: every epoch; a local copy: the copy)
    Recommendation: the bytes/s the node's ranks read (ranks per node x expected samples/s x
    stored bytes per sample) as a share of the node's network; past 80% the network sets the
    pace (the model caps the rank's loader at its share); for a copy, its time at the network's
    rate
    Source: the vendor's network figure (the instance catalogue); the expected rate (MEAS-1/2)
    """

    id = "PLAN-2"
    decision = DecisionKind.JOB
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        target = ctx.hardware.target
        if target is None or target.network_gbps is None:
            return None
        nic = target.network_gbps * 1e9 / 8  # bytes/s
        source = ctx.training_source(state)
        if source == "copy-local":
            if not ctx.reads.in_s3:
                return None
            seconds = ctx.total_bytes / nic
            return self.finding(
                round(seconds, 1),
                f"The node's {target.network_gbps:g} Gbit/s network copies the "
                f"{data_size(ctx.total_bytes)} in no less than {duration(seconds)}.",
                evidence={"network_bytes_per_s": nic, "copy_s_at_network": round(seconds, 1)},
            )
        per_rank = float(state.get(Key.EXPECTED_SAMPLES_PER_S, 0.0))
        need = ctx.ranks_per_node * per_rank * ctx.stored_bytes_per_sample
        busy = need / nic
        text = (
            f"The node's {counted(ctx.ranks_per_node, 'rank')} read {data_rate(need)}: "
            f"{share(busy)} of its {target.network_gbps:g} Gbit/s network."
        )
        if busy > NETWORK_BUSY_SHARE:
            text += (
                " The network sets the pace: pack the data smaller (decoded samples are larger "
                "than their JPEGs, stored ones smaller), cache it locally, or use a node with "
                "more network."
            )
        return self.finding(
            round(busy, 3),
            text,
            evidence={"node_read_bytes_per_s": round(need), "network_bytes_per_s": nic},
        )


class PlanRestsOn(Rule):
    """What a plan for another machine rests on.

    Condition: a target machine
    Recommendation: the costs measured here that the model carries to the target (CPU per sample,
    a worker's CPU per sample, the training thread's taking of batches, the storage's first byte
    and rate per connection, the CPU of an S3 server on this machine's loopback that the trial's
    CPU quota left out), the counts this machine measured against the count planned (above
    them, the model alone), and what the plan assumes (a core as fast as one here unless given,
    a figure not given taken from this machine)
    Source: the trial's measurements (advisor/measure/trial/), the target's figures
    (advisor/measure/hardware/target.py)
    """

    id = "PLAN-3"
    decision = DecisionKind.JOB
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        target = ctx.hardware.target
        if target is None:
            return None
        w = int(state.get(Key.NUM_WORKERS, 0))
        costs = ctx.costs(state, w)
        parts = [f"{duration(ctx.cpu_s_per_sample)} of CPU per sample (the decode loop)"]
        if costs.worker_s:
            parts.append(f"{duration(costs.worker_s)} a worker spends per sample")
        if costs.main_s:
            parts.append(f"{duration(costs.main_s)} of the training thread's per sample")
        storage = ctx.read_storage(state)
        if storage.measured:
            local = ("read", "read of local files")
            first, one = local if storage.local else ("byte", "connection")
            parts.append(
                f"a first {first} of {duration(storage.first_byte_s)} and "
                f"{data_rate(storage.per_connection_mb_s * 1e6)} per {one}"
            )
        served = ctx.trial.server_s(w) if ctx.trial is not None else None
        if served:
            parts.append(
                f"{duration(served)} per sample of the S3 server on this machine's loopback, "
                "outside the trial's CPU quota (the plan counts it on the target's cores: a "
                "loopback server runs beside the loader)"
            )
        measured = "measured here" if ctx.cpu_measured else "assumed (no trial ran)"
        text = (
            f"Planned for {target.describe()}: {ctx.cores_per_rank:.3g} cores per rank, from "
            + "; ".join(parts)
            + f", {measured}"
            + (f", with a core {target.core_speed:g}x as fast" if target.core_speed != 1 else "")
            + "."
        )
        here = ctx.hardware.trial_cores
        if ctx.trial is not None and w > math.ceil(here - 1e-9):
            text += (
                f" This machine has {here:g} cores: the trial measured counts up to "
                f"{math.ceil(here - 1e-9)}, so {workers(w)} per rank is the model's alone."
            )
        if target.assumptions():
            text += " It assumes " + "; ".join(target.assumptions()) + "."
        return self.finding(
            ctx.cores_per_rank,
            text,
            evidence={
                "target": target.name or "given by its figures",
                "cores_per_rank": ctx.cores_per_rank,
                "measured_on_cores": here,
                "core_speed": target.core_speed,
            },
            measured=ctx.cpu_measured,
        )

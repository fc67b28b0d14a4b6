"""The native reader's settings per loader process: requests and bytes in flight (RD-1, RD-2)."""

from __future__ import annotations

from advisor.core.model import process_objects_per_s
from advisor.core.reader_budget import (
    BUDGET_OBJECTS,
    BUDGET_RAM_SHARE,
    READER_BUDGET_BYTES,
    READER_PART_BYTES,
    inflight_bytes,
    requests_in_flight,
)
from advisor.core.units import MB, data_size, duration
from advisor.decide.facts.context import Context
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import HEADROOM


class ReaderRequestsInFlight(Rule):
    """Requests in flight per reader.

    Condition: the training streams the objects (directly or after resharding)
    Recommendation: the native reader's `max_inflight_requests` per loader process: the value the
    trial's sweep read with when training reads what the trial read; else 2 x (first byte + object /
    bandwidth) x the objects/s one process may have to deliver (the consumer rate x 1.2, at most
    what one process takes in: 3,000 objects/s or 1,000 MB/s, and no more than its measured
    transform lets through), between the reader's default 32 and 256; objects of 8 MiB or more
    (split into parts, bounded by the byte budget) keep 32. Exported with the loader
    Source: [CPP] 1 next steps: expose the reader's concurrency; measured: first-byte latency
    (Little's law)
    """

    id = "RD-1"
    decision = DecisionKind.REQUESTS_IN_FLIGHT
    key = Key.REQUESTS_IN_FLIGHT

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.training_source(state) != "stream":
            return None  # local and shared file systems: the reader's default
        trial = ctx.trial
        if trial is not None and trial.requests_in_flight and ctx.reads.as_trialled(state):
            k = trial.requests_in_flight
            probe = trial.storage
            latency = f" at {duration(probe.first_byte_p50_s)} to first byte" if probe else ""
            return self.finding(
                k,
                f"{k} requests at once per process{latency}: the setting the trial's DataLoader "
                "sweep read with, so its measured rates hold for it.",
                evidence={
                    "requests_in_flight": k,
                    "first_byte_p50_s": probe.first_byte_p50_s if probe else None,
                },
                measured=True,
                confidence="high",
            )
        storage = ctx.storage_for("stream")
        object_bytes, spo = ctx.layout(state)
        cpu_s_per_object = ctx.cpu_s_per_sample * spo if ctx.cpu_measured else 0.0
        target = process_objects_per_s(object_bytes, cpu_s_per_object)
        if ctx.consumer_rate is not None:
            target = min(target, ctx.consumer_rate * HEADROOM / spo)
        k = requests_in_flight(
            storage.first_byte_s, object_bytes, storage.per_connection_mb_s, target
        )
        fetch_ms = (storage.first_byte_s + object_bytes / (storage.per_connection_mb_s * MB)) * 1e3
        if object_bytes >= READER_PART_BYTES:
            rationale = (
                f"Objects of {data_size(object_bytes)} are read as parallel "
                f"{data_size(READER_PART_BYTES)} parts within the reader's byte budget: its "
                f"default {k} requests at once."
            )
        else:
            rationale = (
                f"Each GET is open for about {duration(fetch_ms / 1e3)}; {target:,.0f} objects/s "
                f"per process need about {target * fetch_ms / 1e3:,.0f} open requests (Little's "
                f"law), so {k} requests at once "
                "(twice that for jitter, between the reader's default and its cap)."
            )
        return self.finding(
            k,
            rationale,
            evidence={
                "first_byte_s": storage.first_byte_s,
                "per_connection_mb_s": storage.per_connection_mb_s,
                "object_bytes": object_bytes,
                "objects_per_s_per_process": target,
            },
            measured=storage.measured,
            confidence="medium" if storage.measured else "low",
        )


class ReaderBytesInFlight(Rule):
    """Bytes in flight per reader.

    Condition: the training streams from S3 objects it reads whole, of which the reader's default
    256 MiB byte budget holds fewer than 4. Tar shards (read as samples) and text shards (read as
    records), and the shards a reshard writes, are read as streams: a worker holds each one's
    read-ahead (128 MiB by default; 72 MiB for records) and the next one's first parts, never a
    whole shard, so the default holds them whatever their size
    Recommendation: the native reader's `max_inflight_bytes` per loader process: the budget the
    trial's sweep read with when training reads what the trial read; else 4 objects in whole 8 MiB
    parts, the budgets of cores per rank + 1 processes within 25% of the rank's available RAM (never
    under the default). Exported with the loader
    Source: [CPP] 1 next steps: expose the reader's concurrency; Little's law on bytes: parts in
    flight and results waiting for the consumer share the budget; measured: 200 MB objects, 0
    workers, 3.7-4.6/s with 768 MiB against 3.3-3.7 with 256 MiB (docs/benchmarks.md); streams:
    `ReaderConfig.read_ahead_bytes` (native_loader/config.py)
    """

    id = "RD-2"
    decision = DecisionKind.INFLIGHT_BYTES
    key = Key.INFLIGHT_BYTES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.training_source(state) != "stream":
            return None  # local and shared file systems: the reader's default
        object_bytes, _ = ctx.layout(state)
        trial = ctx.trial
        if trial is not None and trial.inflight_bytes and ctx.reads.as_trialled(state):
            budget, measured = trial.inflight_bytes, True
        else:
            hw = ctx.hardware
            budget = inflight_bytes(
                object_bytes, hw.ram_available_bytes, hw.usable_cores, ctx.ranks_per_node,
                streamed=ctx.streamed(state),
            )  # fmt: skip
            measured = False
        if budget <= READER_BUDGET_BYTES:
            return None  # the reader's default holds enough of these objects
        held = budget / max(object_bytes, 1.0)
        if measured:
            how = "the budget the trial's DataLoader sweep read with, so its measured rates hold"
        else:
            how = (
                f"{BUDGET_OBJECTS} objects, within {BUDGET_RAM_SHARE:.0%} of the available RAM "
                f"over {ctx.cores_per_rank + 1} loader processes"
            )
        return self.finding(
            budget,
            f"Objects of {data_size(object_bytes)} fill the reader's default "
            f"{data_size(READER_BUDGET_BYTES)} byte budget, which in-flight parts and results "
            f"waiting for the consumer share: {data_size(budget)} per process holds "
            f"{held:,.1f} of them ({how}).",
            evidence={"object_bytes": object_bytes, "inflight_bytes": budget},
            measured=measured,
            confidence="high" if measured else "medium",
        )

"""Data layout: shard size (SHARD-1..3) and S3 prefixes (PFX-1); the layout as it is (SHARD-0,
PFX-0) when none of those fires."""

from __future__ import annotations

import math

from advisor.core.reader_budget import READER_READ_AHEAD_BYTES
from advisor.core.units import counted, data_size
from advisor.decide.facts.context import Context
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import (
    MANY_RANKS,
    PREFIX_GET_RATE,
    S3_PREFIX_GET_LIMIT,
    SHARD_FLOOR_BYTES,
    SHARD_MAX_BYTES,
    SHARD_MIN_BYTES,
    SHARD_TARGET_BYTES,
    SHARDS_PER_READER,
)


def _readers(ctx: Context, state: State) -> int:
    return ctx.ranks * max(state.get(Key.NUM_WORKERS, 0), 1)


class FewShardsPerReader(Rule):
    """Enough shards for every reader.

    Condition: total / 150 MB < ranks x workers x 4
    Recommendation: shards of total / (ranks x workers x 4), at least 1 MB
    Source: [IO] 2: ShardedByS3Key M/N, 1-128 MB; [SRC] 3: shuffle by reordering shards
    """

    id = "SHARD-1"
    decision = DecisionKind.SHARD_SIZE
    key = Key.SHARD_SIZE_BYTES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        readers = _readers(ctx, state)
        if ctx.total_bytes / SHARD_TARGET_BYTES >= readers * SHARDS_PER_READER:
            return None
        size = max(int(ctx.total_bytes / (readers * SHARDS_PER_READER)), SHARD_FLOOR_BYTES)
        return self.finding(
            size,
            f"Each reader (one per worker of every rank, {readers} here) needs at least "
            f"{SHARDS_PER_READER} shards: {data_size(ctx.total_bytes)} in "
            f"{readers * SHARDS_PER_READER} shards makes shards of {data_size(size)}.",
            evidence={"total_bytes": ctx.total_bytes, "readers": readers},
        )


class PackSmallObjects(Rule):
    """Pack small objects into ~150 MB shards.

    Condition: median object under 50 MB
    Recommendation: 150 MB shards (tar shards, which the loader streams: a worker holds its
    reader's read-ahead of a shard, 128 MiB by default, not the whole shard)
    Source: [SRC] 3: ~150 MB containers; [CPP] 1: 50-200 MB; streams:
    `ReaderConfig.read_ahead_bytes` (native_loader/config.py)
    """

    id = "SHARD-2"
    decision = DecisionKind.SHARD_SIZE
    key = Key.SHARD_SIZE_BYTES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.p50_bytes >= SHARD_MIN_BYTES:
            return None
        return self.finding(
            SHARD_TARGET_BYTES,
            f"The median object, {data_size(ctx.p50_bytes)}, is under "
            f"{data_size(SHARD_MIN_BYTES)}: packing into shards of about "
            f"{data_size(SHARD_TARGET_BYTES)} cuts the GET count and hides first-byte latency; "
            f"each worker streams its shards, holding {data_size(READER_READ_AHEAD_BYTES)} of "
            "read-ahead, not a whole shard.",
            evidence={"p50_object_bytes": ctx.p50_bytes},
        )


class SplitHugeObjects(Rule):
    """Split objects over 200 MB.

    Condition: median object over 200 MB, read whole (not tar shards read as samples or text
    shards read as records: those stream by ranged GETs within the reader's read-ahead, so a large
    shard costs a worker no more memory than a small one)
    Recommendation: split into 150 MB shards or use ranged GETs
    Source: [IO] 2: very large files need ranged GETs; [CPP] 1: 50-200 MB; streams:
    `ReaderConfig.read_ahead_bytes` (native_loader/config.py)
    """

    id = "SHARD-3"
    decision = DecisionKind.SHARD_SIZE
    key = Key.SHARD_SIZE_BYTES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.p50_bytes <= SHARD_MAX_BYTES or ctx.streamed(state):
            return None
        return self.finding(
            SHARD_TARGET_BYTES,
            f"The median object, {data_size(ctx.p50_bytes)}, is over "
            f"{data_size(SHARD_MAX_BYTES)}: one reader cannot parallelize within it; split it "
            f"into shards of about {data_size(SHARD_TARGET_BYTES)} or read it with ranged GETs.",
            evidence={"p50_object_bytes": ctx.p50_bytes},
        )


class SpreadPrefixes(Rule):
    """Spread shards over prefixes.

    Condition: training streams from S3 and (ranks >= 8 on one prefix, or expected GET/s / prefixes
    > the planned rate per prefix: 3,500, or that share (3,500 / 5,500) of the user's
    `--get-limit`)
    Recommendation: spread the shards over max(GET/s / planned rate, min(ranks, 16)) prefixes,
    read in shuffled order
    Source: [CPP] 1: shard across buckets and prefixes; expected GET/s; `bench throttle
    --listing-order`: read in listing order, readers met 503s over six prefixes that shuffled
    reads did not
    """

    id = "PFX-1"
    decision = DecisionKind.PREFIX_LAYOUT
    key = Key.PREFIX_LAYOUT

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.training_source(state) != "stream":
            return None
        _, spo = ctx.layout(state)
        gets_per_s = ctx.ranks * ctx.expected_rate(state) / spo
        prefixes = max(ctx.profile.distinct_prefixes, 1)
        given = ctx.workload.get_limit
        planned = (
            PREFIX_GET_RATE if given is None else given * PREFIX_GET_RATE / S3_PREFIX_GET_LIMIT
        )
        by_rate = math.ceil(gets_per_s / planned)
        many_ranks = ctx.ranks >= MANY_RANKS and prefixes < 2
        if by_rate <= prefixes and not many_ranks:
            return None
        target = max(by_rate, min(ctx.ranks, 16) if many_ranks else 1, 2)
        return self.finding(
            target,
            f"{counted(ctx.ranks, 'rank')} issue{'s' if ctx.ranks == 1 else ''} about "
            f"{gets_per_s:,.0f} GET/s over "
            f"{counted(prefixes, 'prefix', 'prefixes')}: spread the shards over at least "
            f"{target} prefixes to avoid 503 SlowDown, and read them shuffled (the exported "
            "loader does): in listing order every reader reaches the same prefix at once.",
            evidence={
                "ranks": ctx.ranks,
                "get_per_s": round(gets_per_s, 1),
                "distinct_prefixes": prefixes,
            },
        )


class KeepShardSize(Rule):
    """Keep the objects as shards.

    Condition: otherwise (no other SHARD rule fired: the objects are 50-200 MB, or larger and
    streamed, and numerous enough for every reader)
    Recommendation: the objects as they are: shards of the median object size, within 50-200 MB
    where they are read whole
    Source: [CPP] 1: 50-200 MB; [SRC] 3: ~150 MB containers; streams:
    `ReaderConfig.read_ahead_bytes` (native_loader/config.py)
    """

    id = "SHARD-0"
    decision = DecisionKind.SHARD_SIZE
    key = Key.SHARD_SIZE_BYTES

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.streamed(state) and ctx.p50_bytes > SHARD_MAX_BYTES:
            return self.finding(
                int(ctx.p50_bytes),
                f"Objects of {data_size(ctx.p50_bytes)} are streamed: each worker holds "
                f"{data_size(READER_READ_AHEAD_BYTES)} of read-ahead, not a whole shard, and they "
                "are numerous enough: keep the layout.",
                evidence={"p50_object_bytes": ctx.p50_bytes, "streamed": True},
            )
        return self.finding(
            int(min(max(ctx.p50_bytes, SHARD_MIN_BYTES), SHARD_MAX_BYTES)),
            f"Objects are already {data_size(SHARD_MIN_BYTES)} to {data_size(SHARD_MAX_BYTES)} "
            "and numerous enough: keep the layout.",
            evidence={"p50_object_bytes": ctx.p50_bytes},
        )


class KeepPrefixes(Rule):
    """Keep the prefix layout.

    Condition: otherwise (PFX-1 did not fire: the training does not stream from S3, or the
    request rate per prefix stays under S3's limits)
    Recommendation: the prefixes the data already uses (at least 1)
    Source: [CPP] 1: shard across buckets and prefixes; expected GET/s
    """

    id = "PFX-0"
    decision = DecisionKind.PREFIX_LAYOUT
    key = Key.PREFIX_LAYOUT

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        streamed = ctx.training_source(state) == "stream"
        return self.finding(
            max(ctx.profile.distinct_prefixes, 1),
            "The request rate per prefix stays well under the storage's limits: keep the layout."
            if streamed
            else "Training does not stream from the bucket, so its prefixes set no request "
            "rate: keep the layout.",
            evidence={"ranks": ctx.ranks, "streamed": streamed},
        )

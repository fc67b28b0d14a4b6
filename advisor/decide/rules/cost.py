"""Cost notes: GET requests, start-up, idle GPU time, shared file system price, workers with no
data and the job's request rate against the storage's limit (COST-1..6)."""

from __future__ import annotations

import math

from advisor.core.units import TB, counted, data_rate, data_size, duration, per_s, rate
from advisor.decide.rules.base import Rule
from advisor.decide.rules.context import Context
from advisor.decide.rules.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.thresholds import (
    FASTFILE_LIST_OBJECTS_S,
    FSX_INDEX_OBJECTS_PER_HOUR,
    FSX_MIN_TB,
    FSX_USD_PER_TB_MONTH,
    GET_PRICE_PER_MILLION,
    S3_EXPRESS_BUCKET_GET_LIMIT,
    S3_PREFIX_GET_LIMIT,
    S3_USD_PER_TB_MONTH,
    THROTTLED_SHARE,
)


class GetRequestCost(Rule):
    """GET requests per epoch.

    Condition: data on S3
    Recommendation: GET requests per epoch and their price ($0.40 per million)
    Source: [SRC] 3 costs
    """

    id = "COST-1"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.in_s3:
            return None
        source = ctx.training_source(state)
        objects = ctx.objects_read(state)
        epochs = ctx.workload.epochs
        reads = 1 if source != "stream" or state.get(Key.CACHE_LOCALLY) else epochs
        gets = objects * reads
        passes = counted(reads, "pass", "passes")
        text = f"About {objects:,.0f} GET requests per pass, {passes} over S3"
        if state.get(Key.DATA_SOURCE) == "reshard-first":
            gets += ctx.profile.object_count  # packing reads every small object once
            text += f", plus {ctx.profile.object_count:,} to pack the shards once"
        price = gets / 1e6 * GET_PRICE_PER_MILLION
        return self.finding(
            round(price, 2),
            f"{text}: {f'about ${price:,.2f}' if price >= 0.01 else 'less than $0.01'} in "
            "requests.",
            evidence={"get_requests": round(gets), "requests_usd": round(price, 2)},
        )


class StartupTime(Rule):
    """Start-up delay.

    Condition: copy-local from S3, or streaming
    Recommendation: start-up delay: the copy at the rate the trial measured copying a sample
    (else estimated from its read rate, else File mode's ~200 MB/s, said so), or FastFile listing
    at ~5,500 objects/s
    Source: the trial's timed copy; [SRC] 3 File mode ~200 MB/s; FastFile listing
    """

    id = "COST-2"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.in_s3:
            return None
        source = ctx.training_source(state)
        objects = ctx.objects_read(state)
        if source == "copy-local":
            copy = ctx.copy_rate()
            seconds = ctx.total_bytes / copy.bytes_per_s
            what = f"copying {data_size(ctx.total_bytes)} at {copy.words}"
        elif source == "stream":
            seconds = objects / FASTFILE_LIST_OBJECTS_S
            what = (
                f"listing {counted(round(objects), 'object')} at about "
                f"{per_s(FASTFILE_LIST_OBJECTS_S)} objects/s"
            )
        else:
            return None
        return self.finding(
            round(seconds, 1),
            f"Start-up: {what} takes about {duration(seconds)} before the first batch.",
            evidence={"startup_s": round(seconds, 1)},
        )


class IdleGpuCost(Rule):
    """Idle GPU time per epoch.

    Condition: input-bound
    Recommendation: idle GPU seconds per epoch: samples per rank / expected - samples per rank /
    consumer
    Source: [SRC] 3: instance seconds dominate the bill
    """

    id = "COST-3"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        rate, consumer = state.get(Key.EXPECTED_SAMPLES_PER_S), ctx.consumer_rate
        if not state.get(Key.INPUT_BOUND) or not rate or consumer is None:
            return None
        samples = ctx.samples_per_rank
        idle = samples / rate - samples / consumer
        return self.finding(
            round(idle, 1),
            f"Each epoch the GPUs idle for about {duration(idle)} waiting for data "
            f"({samples:,.0f} samples per rank).",
            evidence={"idle_s_per_epoch": round(idle, 1), "samples_per_rank": round(samples)},
        )


class SharedFsStorageCost(Rule):
    """Shared file system storage cost.

    Condition: data source `shared-fs` the job creates (data not already on FSx)
    Recommendation: monthly FSx price (max(total, 1.2 TB) x $140/TB) next to S3 ($23/TB), bucket
    indexing time (~2 M objects/h)
    Source: [SRC] 3: FSx Scratch 2 costs and indexing
    """

    id = "COST-4"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if state.get(Key.DATA_SOURCE) != "shared-fs" or ctx.on_fsx:
            return None
        tb = ctx.total_bytes / TB
        fsx = max(tb, FSX_MIN_TB) * FSX_USD_PER_TB_MONTH
        s3 = tb * S3_USD_PER_TB_MONTH
        index_h = ctx.profile.object_count / FSX_INDEX_OBJECTS_PER_HOUR
        return self.finding(
            round(fsx, 2),
            f"FSx for Lustre for {data_size(ctx.total_bytes)}: about ${fsx:,.0f} a month (S3 "
            f"alone about ${s3:,.0f}); linking the bucket indexes "
            f"{counted(ctx.profile.object_count, 'object')} in about {duration(index_h * 3600)}.",
            evidence={"fsx_usd_month": round(fsx, 2), "s3_usd_month": round(s3, 2)},
        )


def idle_readers(objects: int, ranks: int, workers: int) -> str:
    """The readers that get no object when `objects` whole objects are dealt in turn to the
    readers `rank * workers + worker` (object i to reader i mod ranks x workers), in words."""
    parts = []
    first_idle = objects  # readers from this index on get nothing
    rank, worker = divmod(first_idle, workers)
    if worker:
        which = f"worker {worker}" if worker == workers - 1 else f"workers {worker}-{workers - 1}"
        parts.append(f"rank {rank}'s {which}")
        rank += 1
    if rank < ranks:
        whole = f"rank {rank}" if rank == ranks - 1 else f"ranks {rank}-{ranks - 1}"
        parts.append(f"every worker of {whole}")
    return " and ".join(parts)


class IdleReaders(Rule):
    """Workers with no data.

    Condition: fewer objects (shards) per pass than readers (ranks x workers, at least one
    worker per rank)
    Recommendation: the readers that get no object each pass, named by rank and worker; more
    (smaller) shards, or fewer workers
    Source: `S3IterableDataset` deals whole objects to the readers in turn
    (native_loader/datasets.py); huggingface/datasets 8669, 7999: workers with no shard idle
    without a warning
    """

    id = "COST-5"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        workers = max(int(state.get(Key.NUM_WORKERS, 0)), 1)
        readers = ctx.ranks * workers
        objects = max(math.floor(ctx.objects_read(state)), 1)
        if objects >= readers:
            return None
        idle = readers - objects
        return self.finding(
            idle,
            f"{counted(objects, 'object')} per pass for {readers} readers "
            f"({counted(ctx.ranks, 'rank')} x {counted(workers, 'worker')}): {idle} would get "
            f"nothing and idle, {idle_readers(objects, ctx.ranks, workers)}; split the data "
            f"into at least {readers} shards, or use fewer workers.",
            evidence={"objects": objects, "readers": readers, "idle_readers": idle},
        )


def storage_get_limit(uri: str, endpoint_url: str | None) -> tuple[float, str] | None:
    """(GET/s the storage serves before it throttles, what it is) for the data at `uri`: a
    directory bucket of S3 Express (its name ends in ``--x-s3``) per bucket, S3 Standard per
    prefix; None for another endpoint (its limit is not known here)."""
    if not uri.startswith("s3://") or endpoint_url:
        return None
    bucket = uri[len("s3://") :].split("/", 1)[0]
    if bucket.endswith("--x-s3"):
        return S3_EXPRESS_BUCKET_GET_LIMIT, "S3 Express serves about {:,} GET/s per bucket"
    return S3_PREFIX_GET_LIMIT, "S3 Standard serves about {:,} GET/s per prefix"


class StorageRequestLimit(Rule):
    """The job's request rate against the storage's limit.

    Condition: the training streams from S3 (AWS, not another endpoint), and ranks x the
    expected GET/s per rank exceeds the storage's limit: S3 Standard about 5,500 GET/s per prefix
    (x the prefixes the data uses), an S3 Express directory bucket (`--x-s3`) 200,000 GET/s
    Recommendation: the job's GET/s and bytes/s against that limit, and the samples/s per rank
    under throttling (the reader holds 0.8-0.95 of a limit asked 3x: `bench throttle`); more
    prefixes (PFX-1), larger shards, or S3 Express
    Source: AWS S3 user guide, performance: 5,500 GET/HEAD per second per prefix; S3 Express
    One Zone: 200,000 reads per second per directory bucket by default; `bench throttle`
    (docs/benchmarks.md)
    """

    id = "COST-6"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        limit = storage_get_limit(ctx.profile.uri, ctx.profile.endpoint_url)
        if limit is None or not ctx.in_s3 or ctx.training_source(state) != "stream":
            return None
        per_unit, what = limit
        express = per_unit == S3_EXPRESS_BUCKET_GET_LIMIT
        units = 1 if express else max(ctx.profile.distinct_prefixes, 1)
        allowed = per_unit * units
        object_bytes, spo = ctx.layout(state)
        expected = ctx.expected_rate(state)
        gets_per_s = ctx.ranks * expected / spo
        if gets_per_s <= allowed:
            return None
        low, high = (allowed * share * spo / ctx.ranks for share in THROTTLED_SHARE)
        where = "" if express else f" x {counted(units, 'prefix', 'prefixes')}"
        return self.finding(
            round(low, 1),
            f"{counted(ctx.ranks, 'rank')} would ask about {gets_per_s:,.0f} GET/s "
            f"({data_rate(gets_per_s * object_bytes)}); {what.format(per_unit)}{where}: "
            f"{allowed:,.0f}. Past it S3 answers 503 SlowDown and the readers slow down to "
            f"0.8-0.95 of it: about {low:,.0f}-{high:,.0f} samples/s per rank instead of "
            f"{rate(expected)}. Spread the keys over more prefixes, pack larger shards"
            + ("" if express else ", or use S3 Express")
            + ".",
            evidence={"get_per_s": round(gets_per_s, 1), "limit_get_per_s": allowed},
        )

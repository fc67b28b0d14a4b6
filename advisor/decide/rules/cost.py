"""Cost notes: GET requests, start-up, idle GPU time, shared file system price, workers with no
data and the job's request rate against the storage's limit, streamed or copied (COST-1..7)."""

from __future__ import annotations

import math

from advisor.core.units import TB, counted, data_rate, data_size, duration, per_s, rate
from advisor.decide.facts.context import Context
from advisor.decide.facts.request_plan import plan_requests, storage_get_limit
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import (
    FASTFILE_LIST_OBJECTS_S,
    FSX_INDEX_OBJECTS_PER_HOUR,
    FSX_MIN_TB,
    FSX_USD_PER_TB_MONTH,
    GET_PRICE_PER_MILLION,
    INDEX_BYTES_PER_KEY,
    LIST_PAGE_KEYS,
    S3_USD_PER_TB_MONTH,
)


class GetRequestCost(Rule):
    """GET requests per epoch.

    Condition: data on S3
    Recommendation: GET requests per epoch and their price ($0.40 per million); a local copy is
    made by every node, one pass over S3 each (nodes x the objects)
    Source: [SRC] 3 costs
    """

    id = "COST-1"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.reads.in_s3:
            return None
        source = ctx.training_source(state)
        objects = ctx.objects_read(state)
        epochs = ctx.workload.epochs
        reads = 1 if source != "stream" or state.get(Key.CACHE_LOCALLY) else epochs
        nodes = ctx.workload.nodes
        if source == "copy-local":
            reads = nodes  # every node copies the whole set (`native_loader/local_copy.py`)
        gets = objects * reads
        passes = counted(reads, "pass", "passes")
        if source == "copy-local" and nodes > 1:
            passes = f"one copy per node: {passes}"
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
    Recommendation: start-up delay: the copy at the rate its prepare() measured, else the trial
    copying a sample (else estimated from its read rate, else File mode's ~200 MB/s, said so),
    or FastFile listing at ~5,500 objects/s; streaming, the listing's LIST requests (1,000 keys
    each; once per node with a local cache, which keeps the listing, else once per rank) and its
    index in each rank's memory (at most 100 B a key)
    Source: the set's or the trial's timed copy; [SRC] 3 File mode ~200 MB/s; FastFile listing;
    the native loader's index (tests/native/test_native_index.py)
    """

    id = "COST-2"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.reads.in_s3:
            return None
        source = ctx.training_source(state)
        objects = ctx.objects_read(state)
        if source == "copy-local":
            copy, seconds = ctx.copy_rate(), ctx.copy_seconds()
            what = f"copying {data_size(ctx.total_bytes)} at {copy.words}"
        elif source == "stream":
            return self._listing(ctx, state, objects)
        else:
            return None
        return self.finding(
            round(seconds, 1),
            f"Start-up: {what} takes about {duration(seconds)} before the first batch.",
            evidence={"startup_s": round(seconds, 1)},
        )

    def _listing(self, ctx: Context, state: State, objects: float) -> Finding:
        seconds = objects / FASTFILE_LIST_OBJECTS_S
        saved = bool(state.get(Key.CACHE_LOCALLY))  # the loader saves its listing in the cache
        listings = ctx.workload.nodes if saved else ctx.ranks
        requests = math.ceil(objects / LIST_PAGE_KEYS) * listings
        memory = objects * INDEX_BYTES_PER_KEY
        who = (
            f"once per node ({counted(listings, 'node')}: the local cache keeps the listing)"
            if saved
            else f"once per rank ({counted(listings, 'rank')})"
        )
        return self.finding(
            round(seconds, 1),
            f"Start-up: listing {counted(round(objects), 'object')} at about "
            f"{per_s(FASTFILE_LIST_OBJECTS_S)} objects/s takes about {duration(seconds)} before "
            f"the first batch, {who}: {requests:,} LIST requests; each rank holds the listing "
            f"in about {data_size(memory)} of memory.",
            evidence={
                "startup_s": round(seconds, 1),
                "list_requests": requests,
                "index_bytes_per_rank": round(memory),
            },
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
        if state.get(Key.DATA_SOURCE) != "shared-fs" or ctx.reads.on_fsx:
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


class StorageRequestLimit(Rule):
    """The job's request rate against the storage's limit.

    Condition: the training streams from S3, and ranks x the expected GET/s per rank exceeds
    the storage's limit: S3 Standard about 5,500 GET/s per prefix (x the prefixes the data
    uses), an S3 Express directory bucket (`--x-s3`) 200,000 GET/s, or on another endpoint the
    user's figure per prefix (`--get-limit`; without it no limit is checked there)
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
        limit = storage_get_limit(ctx.profile.uri, ctx.profile.endpoint_url, ctx.workload.get_limit)
        if limit is None or not ctx.reads.in_s3 or ctx.training_source(state) != "stream":
            return None
        object_bytes, spo = ctx.layout(state)
        expected = ctx.expected_rate(state)
        prefixes = max(ctx.profile.distinct_prefixes, 1)
        job = plan_requests(
            limit, ranks=ctx.ranks, samples_per_s_per_rank=expected, samples_per_object=spo,
            prefixes=prefixes,
        )  # fmt: skip
        if not job.throttled:
            return None
        gets_per_s, allowed = job.asked_get_per_s, job.allowed_get_per_s
        low, high = (served * spo / ctx.ranks for served in job.served_get_per_s)
        where = f" x {counted(prefixes, 'prefix', 'prefixes')}" if limit.per_prefix else ""
        return self.finding(
            round(low, 1),
            f"{counted(ctx.ranks, 'rank')} would ask about {gets_per_s:,.0f} GET/s "
            f"({data_rate(gets_per_s * object_bytes)}); {limit.what}{where}: "
            f"{allowed:,.0f}. Past it the storage answers 503 SlowDown and the readers slow "
            f"down to 0.8-0.95 of it: about {low:,.0f}-{high:,.0f} samples/s per rank instead "
            f"of {rate(expected)}. Spread the keys over more prefixes, pack larger shards"
            + (", or use S3 Express" if limit.s3_standard else "")
            + ".",
            evidence={"get_per_s": round(gets_per_s, 1), "limit_get_per_s": allowed},
        )


class CopyRequestLimit(Rule):
    """The local copies' request rate against the storage's limit, before the first batch.

    Condition: the training reads a local copy of an S3 set (copy-local), and the nodes, each
    making its one copy at once (ranks on a node share it: `native_loader/local_copy.py`), ask
    more than the storage's limit (as COST-6): each node fetches the set's objects at the
    copy's measured rate (`Context.copy_rate`: the copy COST-2 and PLAN-1 time)
    Recommendation: the copies' GET/s against that limit and how long they then take before the
    first batch (all nodes' GETs at the readers' share of the limit under throttling); fewer,
    larger objects (a re-shard), more prefixes, or a copy made once and shared
    Source: AWS S3 user guide, performance (as COST-6); the copy's measured rate (its
    prepare(), else the trial's timed copy); `bench throttle` for the readers' share of a limit
    """

    id = "COST-7"
    decision = DecisionKind.COST
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        limit = storage_get_limit(ctx.profile.uri, ctx.profile.endpoint_url, ctx.workload.get_limit)
        if limit is None or not ctx.reads.in_s3 or ctx.training_source(state) != "copy-local":
            return None
        nodes, objects = ctx.workload.nodes, ctx.profile.object_count
        # each node copies at the copy's rate (`copy_rate`), so many objects a second
        unthrottled_s = ctx.copy_seconds()
        per_node = max(objects, 1) / max(unthrottled_s, 1e-6)
        prefixes = max(ctx.profile.distinct_prefixes, 1)
        job = plan_requests(limit, ranks=nodes, samples_per_s_per_rank=per_node, prefixes=prefixes)
        if not job.throttled:
            return None
        slow, fast = (nodes * objects / served for served in job.served_get_per_s)
        return self.finding(
            round(fast, 1),
            f"{counted(nodes, 'node')} each copy the {counted(objects, 'object')} at once: "
            f"about {job.asked_get_per_s:,.0f} GET/s; {limit.what}"
            + (f" x {counted(prefixes, 'prefix', 'prefixes')}" if limit.per_prefix else "")
            + f": {job.allowed_get_per_s:,.0f}. Throttled, the copies take about "
            f"{duration(fast)}-{duration(slow)} before the first batch instead of "
            f"{duration(unthrottled_s)}. Pack the objects into fewer, larger shards (a "
            "re-shard), spread them over more prefixes, or copy once to storage every node "
            "reads.",
            evidence={
                "get_per_s": round(job.asked_get_per_s, 1),
                "limit_get_per_s": job.allowed_get_per_s,
                "copy_s": [round(fast, 1), round(slow, 1)],
                "unthrottled_copy_s": round(unthrottled_s, 1),
            },
        )

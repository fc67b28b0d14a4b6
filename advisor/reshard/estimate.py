"""`--dry-run`: the plan's shape, plus time and request cost from a short measured probe of the
source's GET rate and the destination's write rate. Nothing is left at the destination."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from advisor.reshard.config import ReshardConfig
from advisor.reshard.plan import PLAN_DIR, Plan, size_histogram
from advisor.reshard.store import Store
from native_loader import ObjectInfo, S3Reader
from native_loader.uri import uri_scheme

# AWS S3 Standard request prices, us-east-1 (https://aws.amazon.com/s3/pricing/), USD per 1000.
PRICE_GET_PER_1000 = 0.0004
PRICE_PUT_LIST_PER_1000 = 0.005
PROBE_OBJECTS = 256  # at most; a few rounds of the reader's concurrency
PROBE_WRITE_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Estimate:
    """The plan's shape and what moving it should take."""

    shards: int
    samples: int
    objects: int
    source_bytes: int
    tar_bytes: int
    histogram: tuple[tuple[int, int], ...]  # (lower bound B, shards) per power-of-two bin
    skipped: int
    classes: int
    get_requests: int
    put_requests: int  # shard PUTs or multipart create/part/complete calls, markers and index
    list_requests: int
    request_cost_usd: float  # at AWS S3 Standard list prices; 0 for local folders
    probe_objects: int
    probe_objects_per_s: float
    probe_read_mb_per_s: float
    probe_write_mb_per_s: float
    read_seconds: float  # the source at the probed rate
    write_seconds: float  # the shards at the probed write rate
    seconds: float  # reads and writes overlap: the slower of the two, plus one shard's write


def estimate(
    plan: Plan, store: Store, reader: S3Reader, source: str, config: ReshardConfig
) -> Estimate:
    objects = [o for s in plan.shards for x in s.samples for o in x.members]
    step = max(1, len(objects) // PROBE_OBJECTS)
    probe = objects[::step][:PROBE_OBJECTS]
    started = time.perf_counter()
    read_bytes = 0
    for result in reader.read_many(
        ObjectInfo(source + m.source.key, m.source.key, m.source.size, "") for m in probe
    ):
        read_bytes += len(result)
    read_s = max(time.perf_counter() - started, 1e-6)
    objects_per_s = len(probe) / read_s
    write_mb_s = _probe_write(store, min(PROBE_WRITE_BYTES, max(plan.tar_bytes, 2**20)))
    read_seconds = len(objects) / objects_per_s
    write_seconds = plan.tar_bytes / (write_mb_s * 1e6)
    largest = max(s.tar_bytes for s in plan.shards)
    is_s3 = uri_scheme(store.uri) == "s3"
    parts = [math.ceil(s.tar_bytes / config.multipart_bytes) for s in plan.shards]
    puts = sum(1 if p <= 1 else p + 2 for p in parts) + len(plan.shards) + 3
    lists = math.ceil(len(plan.manifest.objects) / 1000) if uri_scheme(source) == "s3" else 0
    gets = len(objects) if uri_scheme(source) == "s3" else 0
    cost = (
        gets / 1000 * PRICE_GET_PER_1000
        + ((puts if is_s3 else 0) + lists) / 1000 * PRICE_PUT_LIST_PER_1000
    )
    return Estimate(
        shards=len(plan.shards),
        samples=plan.samples,
        objects=len(objects),
        source_bytes=plan.source_bytes,
        tar_bytes=plan.tar_bytes,
        histogram=tuple(size_histogram(plan)),
        skipped=len(plan.skipped),
        classes=len(plan.classes),
        get_requests=gets,
        put_requests=puts if is_s3 else 0,
        list_requests=lists,
        request_cost_usd=round(cost, 6),
        probe_objects=len(probe),
        probe_objects_per_s=round(objects_per_s, 1),
        probe_read_mb_per_s=round(read_bytes / read_s / 1e6, 2),
        probe_write_mb_per_s=round(write_mb_s, 2),
        read_seconds=round(read_seconds, 3),
        write_seconds=round(write_seconds, 3),
        seconds=round(max(read_seconds, write_seconds) + largest / (write_mb_s * 1e6), 3),
    )


def _probe_write(store: Store, size: int) -> float:
    """MB/s of one shard-like write of `size` random bytes to the destination (then deleted)."""
    name = f"{PLAN_DIR}/.probe-{os.getpid()}-{time.time_ns()}.bin"
    data = os.urandom(size)
    started = time.perf_counter()
    try:
        store.put_shard(name, data)
        return size / max(time.perf_counter() - started, 1e-6) / 1e6
    finally:
        store.delete(name)

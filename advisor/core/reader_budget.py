"""How much one native reader holds and keeps in flight, and how long a loader waits for its first
batch: the reader's settings per loader process (RD-1, RD-2), its memory, and the first batch's
wait. Pure functions over the object size, the storage and the machine's RAM."""

from __future__ import annotations

import math

from advisor.core.storage import StorageParams
from advisor.core.units import MB
from native_loader.config import ReaderConfig

__all__ = [
    "BUDGET_OBJECTS",
    "BUDGET_RAM_SHARE",
    "INFLIGHT_MAX",
    "READER_BUDGET_BYTES",
    "READER_INFLIGHT",
    "READER_PART_BYTES",
    "READER_READ_AHEAD_BYTES",
    "first_batch_s",
    "inflight_bytes",
    "requests_in_flight",
    "worker_memory_bytes",
]

READER_INFLIGHT: int = ReaderConfig.max_inflight_requests
READER_PART_BYTES: int = ReaderConfig.part_size
READER_BUDGET_BYTES: int = ReaderConfig.max_inflight_bytes
# A streamed object (a tar shard's samples, a text shard's records) is fetched this far ahead of
# its consumer, not whole (`S3IterableDataset`, `S3Reader.open_many`).
READER_READ_AHEAD_BYTES: int = ReaderConfig.read_ahead_bytes
# Streams one loader process holds at once: the shard it reads and the next one, whose first
# parts are fetched while the current one ends.
STREAMS_PER_PROCESS = 2
# A reader's byte budget should hold this many of its objects: one the consumer holds, one
# finished and waiting, two in flight. Under that, large objects idle the reader between objects
# (200 MB objects with 0 workers read faster with 768 MiB than with 256 MiB).
BUDGET_OBJECTS = 4
# All loader processes' budgets together stay within this share of the available RAM.
BUDGET_RAM_SHARE = 0.25
# The most requests in flight per process: at 100 ms of latency 128 held one process reading
# 10 KB objects clearly below what 256 reach. The byte budget still bounds what they hold.
INFLIGHT_MAX = 256


def requests_in_flight(
    first_byte_s: float, object_bytes: float, per_connection_mb_s: float, objects_per_s: float
) -> int:
    """Requests one reader should keep in flight to complete `objects_per_s` (Little's law).

    Each request is open for ``fetch_s = first_byte_s + object_bytes / bandwidth``, so the rate
    needs ``objects_per_s * fetch_s`` requests open; twice that absorbs latency jitter and
    in-order delivery. Never below the reader's default (it costs nothing on fast storage) nor
    above `INFLIGHT_MAX`. Objects of a part or more are split into parts by the reader and
    bounded by its byte budget instead, so they keep the default.
    """
    if object_bytes >= READER_PART_BYTES or per_connection_mb_s <= 0:
        return READER_INFLIGHT
    fetch_s = max(first_byte_s, 0.0) + object_bytes / (per_connection_mb_s * MB)
    need = math.ceil(2 * max(objects_per_s, 0.0) * fetch_s)
    return max(READER_INFLIGHT, min(INFLIGHT_MAX, need))


def inflight_bytes(
    object_bytes: float,
    ram_available: float | None,
    usable_cores: float,
    ranks_per_node: int,
    *,
    streamed: bool = False,
) -> int:
    """Bytes one reader may reserve (`max_inflight_bytes`): BUDGET_OBJECTS objects, in whole
    parts, never under the reader's default. Objects read as streams (`streamed`: tar shards
    read as samples, text shards as records) are never held whole: the budget holds the
    read-ahead of STREAMS_PER_PROCESS streams, whatever the objects' size. With `ram_available`
    (the node's), the budgets of the most loader processes a rank may run (a worker per core,
    and its main process) stay within BUDGET_RAM_SHARE of the rank's share of it, but never
    under the default."""
    held = (
        STREAMS_PER_PROCESS * min(max(object_bytes, 0.0), READER_READ_AHEAD_BYTES)
        if streamed
        else BUDGET_OBJECTS * max(object_bytes, 0.0)
    )
    parts = math.ceil(held / READER_PART_BYTES)
    budget = max(READER_BUDGET_BYTES, parts * READER_PART_BYTES)
    if ram_available is not None:
        ranks = max(ranks_per_node, 1)
        processes = math.ceil(usable_cores / ranks) + 1
        share = ram_available / ranks * BUDGET_RAM_SHARE / processes
        share_parts = int(share // READER_PART_BYTES)
        budget = min(budget, max(READER_BUDGET_BYTES, share_parts * READER_PART_BYTES))
    return budget


def worker_memory_bytes(
    object_bytes: float,
    budget_bytes: float,
    batch_bytes: float,
    prefetch_factor: int,
    *,
    streamed: bool = False,
) -> float:
    """Bytes one loader process holds for the data, beyond its interpreter: its reader's byte
    budget (parts in flight and results not yet taken), its `prefetch_factor` finished batches
    of `batch_bytes` each, and, for objects read whole, the object it is reading from (handed
    over, so outside the budget). A streamed object (`streamed`) is consumed part by part within
    the budget: no whole object, however large the shard."""
    whole = 0.0 if streamed else max(object_bytes, 0.0)
    return budget_bytes + whole + max(prefetch_factor, 1) * max(batch_bytes, 0.0)


def first_batch_s(
    *,
    object_bytes: float,
    samples_per_object: float,
    batch_size: int,
    cpu_s_per_sample: float,
    storage: StorageParams,
    streamed: bool = False,
    processes: int = 1,
) -> float:
    """Seconds from a loader's start to its first batch: the first byte, the bytes that must
    arrive before the batch can be made, and the batch's transform. The bytes come in whole
    parts on up to the reader's concurrent reads, and no faster than the storage's aggregate
    bandwidth shared by the `processes` that start together, each fetching its own first batch.
    Objects read whole must each arrive whole (a 150 MB shard before its first sample); a
    streamed one only up to the batch's samples, at least its first part."""
    spo = max(samples_per_object, 1.0)
    size = max(object_bytes, 0.0)
    objects = math.ceil(max(batch_size, 1) / spo)
    if streamed:
        needed = min(objects * size, max(batch_size * size / spo, min(size, READER_PART_BYTES)))
    else:
        needed = objects * size
    parallel = min(storage.concurrent_reads, max(math.ceil(needed / READER_PART_BYTES), 1))
    transfer = needed / (storage.per_connection_mb_s * MB * parallel)
    if storage.aggregate_mb_s is not None:
        transfer = max(transfer, max(processes, 1) * needed / (storage.aggregate_mb_s * MB))
    return storage.first_byte_s + transfer + max(batch_size, 1) * max(cpu_s_per_sample, 0.0)

"""Data source: where the training reads from (SRC-1..7, ORC-1, CACHE-1), [SRC]'s flow."""

from __future__ import annotations

from advisor.core.units import MB, TB, counted, data_rate, data_size, duration
from advisor.decide.facts.context import Context
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import (
    EFS_BASELINE_MB_S_PER_TB,
    FASTFILE_LIST_OBJECTS_S,
    LARGE_FILE_BYTES,
    MANY_FILES,
    SHARD_TARGET_BYTES,
    SHARED_CACHE_BYTES,
    SMALL_FILE_BYTES,
    SMALL_SET_BYTES,
)
from advisor.decide.words import disk_words


class DataAlreadyOnSharedFs(Rule):
    """Data already on a shared file system.

    Condition: `workload.data_location` is `efs`/`nfs`, or a local path on a network file system
    (NFS, EFS, SMB, s3fs); or `fsx` / a Lustre mount
    Recommendation: `efs` (SageMaker EFS input) or `shared-fs` (FSx for Lustre): read it where it
    lives
    Source: [SRC] 3, decision flow 1: "data already on EFS -> EFS"
    """

    id = "SRC-1"
    decision = DecisionKind.DATA_SOURCE
    key = Key.DATA_SOURCE

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        where = {"location": ctx.workload.data_location, "filesystem": ctx.data_fs}
        if ctx.reads.on_network_fs:
            return self.finding(
                "efs", "The data already lives on EFS/NFS: train from there.", evidence=where
            )
        if ctx.reads.on_fsx:
            return self.finding(
                "shared-fs",
                "The data already lives on FSx for Lustre: train from it.",
                evidence=where,
            )
        return None


class DataAlreadyLocal(Rule):
    """Data already on local disk.

    Condition: the URI is a local path on a local file system
    Recommendation: `copy-local`: the folder is read in place
    Source: [IO] 2: local NVMe much faster than EBS or S3 once the data is there
    """

    id = "SRC-2"
    decision = DecisionKind.DATA_SOURCE
    key = Key.DATA_SOURCE

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.workload.data_location not in (None, "local") or ctx.profile.storage != "local":
            return None
        return self.finding(
            "copy-local",
            "The data is a folder on this machine's file system: it is read in place.",
            evidence={"filesystem": ctx.data_fs, "total_bytes": ctx.total_bytes},
        )


class VeryLargeSharedSet(Rule):
    """Very large set, distributed or small files.

    Condition: total at least 10 TB and (more than one node or median object under 1 MB)
    Recommendation: `shared-fs`: FSx for Lustre / Alluxio-style distributed cache
    Source: [ORC] 4: worth it for distributed training, >= 10 TB, many small files; [SRC] 3 step 4
    """

    id = "ORC-1"
    decision = DecisionKind.DATA_SOURCE
    key = Key.DATA_SOURCE

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        small = ctx.p50_bytes < SMALL_FILE_BYTES
        if ctx.total_bytes < SHARED_CACHE_BYTES or not (ctx.workload.nodes > 1 or small):
            return None
        why = "a multi-node job" if ctx.workload.nodes > 1 else "many small files"
        return self.finding(
            "shared-fs",
            f"{data_size(ctx.total_bytes)} read by {why}: copying it to every node is too slow and "
            "streaming every small object from S3 is request-bound; a shared parallel file "
            "system or distributed cache serves all nodes and jobs.",
            evidence={
                "total_bytes": ctx.total_bytes,
                "p50_object_bytes": ctx.p50_bytes,
                "nodes": ctx.workload.nodes,
            },
        )


class ManySmallFiles(Rule):
    """Many small files.

    Condition: at least 100,000 objects and median under 1 MB
    Recommendation: `reshard-first`: pack into ~150 MB containers (WebDataset tar, TFRecord,
    RecordIO)
    Source: [IO] 2: 2 M x 5 KB takes hours vs 2,000 x 5 MB minutes, files of 1-128 MB; [SRC] 3 step
    2
    """

    id = "SRC-3"
    decision = DecisionKind.DATA_SOURCE
    key = Key.DATA_SOURCE

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        count = ctx.profile.object_count
        if count < MANY_FILES or ctx.p50_bytes >= SMALL_FILE_BYTES:
            return None
        list_s = count / FASTFILE_LIST_OBJECTS_S
        return self.finding(
            "reshard-first",
            f"{counted(count, 'object')} with a median of {data_size(ctx.p50_bytes)}: every GET "
            "pays the first-byte latency for little payload, and listing alone takes "
            f"{duration(list_s)}. Pack them into shards of about {data_size(SHARD_TARGET_BYTES)} "
            "before training.",
            evidence={
                "object_count": count,
                "p50_object_bytes": ctx.p50_bytes,
                "listing_s": round(list_s, 1),
            },
        )


class SmallSetCopyLocal(Rule):
    """Small set fits local disk.

    Condition: data on S3, total at most 100 GB, fits the local disk (free >= 1.1 x total), and not
    (1 epoch and median >= 50 MB)
    Recommendation: `copy-local` (SageMaker File mode), with the copy's time at the rate its
    prepare() measured copying the set, else the trial copying a sample (else estimated from its
    read rate, else assumed, said so)
    Source: [SRC] 3 step 2: small (< 50-100 GB) -> File mode; [IO] 2: File mode when read many times
    """

    id = "SRC-4"
    decision = DecisionKind.DATA_SOURCE
    key = Key.DATA_SOURCE

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.reads.in_s3 or ctx.total_bytes > SMALL_SET_BYTES or not ctx.fits_local_disk:
            return None
        if ctx.workload.epochs == 1 and ctx.p50_bytes >= LARGE_FILE_BYTES:
            return None  # one pass over large shards: streaming costs no start-up (SRC-5)
        rate, copy_s = ctx.copy_rate(), ctx.copy_seconds()
        disk = ctx.hardware.disk
        return self.finding(
            "copy-local",
            f"{data_size(ctx.total_bytes)} fits the local disk; copying it takes about "
            f"{duration(copy_s)} at {rate.words}, and every epoch after that reads "
            f"{disk_words(disk.kind if disk else None)}.",
            evidence={
                "total_bytes": ctx.total_bytes,
                "disk_free_bytes": disk.free_bytes if disk else None,
                "copy_s": round(copy_s, 1),
                "copy_bytes_per_s": round(rate.bytes_per_s),
                "copy_rate": rate.basis,
                "epochs": ctx.workload.epochs,
            },
        )


class StreamFromS3(Rule):
    """Stream from S3.

    Condition: data on S3 (anything the rules above left)
    Recommendation: `stream` with the native reader (SageMaker FastFile)
    Source: [SRC] 3 step 3: larger data, large files -> FastFile; [CPP] 1 native reader
    """

    id = "SRC-5"
    decision = DecisionKind.DATA_SOURCE
    key = Key.DATA_SOURCE

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.reads.in_s3:
            return None
        if ctx.total_bytes > SMALL_SET_BYTES:
            why = f"{data_size(ctx.total_bytes)} is too large to copy before training"
        elif not ctx.fits_local_disk:
            why = "the set does not fit the local disk"
        else:
            why = "a single pass over large objects gains nothing from a copy first"
        return self.finding(
            "stream",
            f"Stream from S3 with the native reader: {why}.",
            evidence={
                "total_bytes": ctx.total_bytes,
                "p50_object_bytes": ctx.p50_bytes,
                "epochs": ctx.workload.epochs,
            },
        )


class AfterReshard(Rule):
    """Source after resharding.

    Condition: the data source is `reshard-first`
    Recommendation: after packing: `copy-local` if at most 100 GB, fits, and several epochs; else
    `stream`
    Source: [SRC] 3 steps 2-3 applied to the packed set
    """

    id = "SRC-6"
    decision = DecisionKind.DATA_SOURCE
    key = Key.AFTER_RESHARD

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if state.get(Key.DATA_SOURCE) != "reshard-first":
            return None
        small = ctx.total_bytes <= SMALL_SET_BYTES and ctx.fits_local_disk
        value = "copy-local" if small and ctx.workload.epochs > 1 else "stream"
        return self.finding(
            value,
            "After packing, "
            + (
                "copy the shards to local disk (small set, several epochs)."
                if value == "copy-local"
                else "stream the shards with the native reader."
            ),
            evidence={"total_bytes": ctx.total_bytes, "epochs": ctx.workload.epochs},
        )


class EfsThroughput(Rule):
    """EFS baseline throughput too low.

    Condition: data source `efs`, consumer rate known, and consumer x bytes per sample x ranks > 150
    MB/s per TB stored
    Recommendation: EFS provisioned throughput (up to 3,072 MB/s) or Max I/O
    Source: [SRC] 3: EFS bursting 150 MB/s baseline per TB; provisioned up to 3,072 MB/s
    """

    id = "SRC-7"
    decision = DecisionKind.DATA_SOURCE
    key = None  # advisory: adds a note, sets no value

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if state.get(Key.DATA_SOURCE) != "efs" or ctx.consumer_rate is None:
            return None
        need_mb_s = ctx.consumer_rate * ctx.stored_bytes_per_sample * ctx.ranks / MB
        baseline_mb_s = EFS_BASELINE_MB_S_PER_TB * ctx.total_bytes / TB
        if need_mb_s <= baseline_mb_s:
            return None
        return self.finding(
            "provisioned-throughput",
            f"The job reads about {data_rate(need_mb_s * MB)} but EFS bursting sustains only "
            f"about {data_rate(baseline_mb_s * MB)} for {data_size(ctx.total_bytes)} stored: use "
            "provisioned throughput (or Max I/O mode for many workers).",
            evidence={"need_mb_s": round(need_mb_s, 1), "baseline_mb_s": round(baseline_mb_s, 1)},
        )


class CacheAfterFirstEpoch(Rule):
    """Cache locally after the first epoch.

    Condition: training streams, more than one epoch, the set fits the local disk
    Recommendation: `cache_locally = True`: the first epoch fills a local cache
    Source: [CPP] 1 next steps: local caching after the first epoch; [ORC] 4
    """

    id = "CACHE-1"
    decision = DecisionKind.DATA_SOURCE
    key = Key.CACHE_LOCALLY

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.training_source(state) != "stream" or ctx.workload.epochs < 2:
            return None
        if not ctx.fits_local_disk:
            return None
        return self.finding(
            True,
            f"{counted(ctx.workload.epochs, 'epoch')} over a set that fits the local disk: the "
            "first epoch streams and fills a local cache, the others read it.",
            evidence={"epochs": ctx.workload.epochs, "total_bytes": ctx.total_bytes},
        )

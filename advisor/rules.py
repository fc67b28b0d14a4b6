"""The decision rules, one small class per rule, in the order of docs/decision-flow.md.

Every rule has a stable id (the same id names its node in the doc's Mermaid diagram), a `key` (the
decision value it sets), the `decision` it contributes to, the `source` line it rests on
(docs/heuristics-sources.md [SRC]/[IO]/[CPP]/[ORC], or a quantity the advisor measures) and a pure
``evaluate(ctx, state)`` that returns a :class:`Finding` or None. ``state`` holds the values set by
earlier rules; :func:`advisor.recommend.recommend` runs :data:`RULES` in order and skips a rule
whose key an earlier rule has already set (first match wins, as in the doc's flow).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from advisor.hardware import HardwareProfile
from advisor.location import NETWORK_FILESYSTEMS
from advisor.model import (
    BUDGET_OBJECTS,
    BUDGET_RAM_SHARE,
    EFS_DEFAULTS,
    HDD_DEFAULTS,
    LOCAL_NVME_DEFAULTS,
    LOCAL_SSD_DEFAULTS,
    READER_BUDGET_BYTES,
    READER_PART_BYTES,
    S3_DEFAULTS,
    SHARED_FS_DEFAULTS,
    Prediction,
    StorageParams,
    choose_workers,
    inflight_bytes,
    predict,
    process_objects_per_s,
    requests_in_flight,
)
from advisor.profile import DatasetProfile
from advisor.workload import Workload
from native_loader.uri import uri_scheme

if TYPE_CHECKING:  # trial.py pulls in torch and the native reader; rules only read its fields
    from advisor.trial import LoaderPoint, TrialResult

__all__ = ["RULES", "Context", "Finding", "Rule", "rule_by_id"]

MB = 1_000_000
GB = 1_000_000_000
TB = 1_000_000_000_000

# Thresholds, each traced in docs/decision-flow.md.
SMALL_SET_BYTES = 100 * GB  # [SRC] "small (< 50-100 GB) -> File mode"
LARGE_FILE_BYTES = 50 * MB  # [SRC] "large files (> 50 MB)"; [CPP] shard floor 50 MB
SMALL_FILE_BYTES = 1 * MB  # [IO] "files of 1-128 MB"; below, a GET carries too little payload
MANY_FILES = 100_000  # [SRC] benchmark: 1.5 M small files -> File mode download dominates
SHARED_CACHE_BYTES = 10 * TB  # [ORC] distributed cache "worth it when >= 10 TB"
SHARD_TARGET_BYTES = 150 * MB  # [SRC] "~150 MB containers"
SHARD_MIN_BYTES, SHARD_MAX_BYTES = 50 * MB, 200 * MB  # [CPP] "50-200 MB"
SHARD_FLOOR_BYTES = 1 * MB  # [IO] "1-128 MB": never smaller than 1 MB
SHARDS_PER_READER = 4  # enough shards per worker to shuffle by reordering shards [SRC]
PREFIX_GET_RATE = 3_500  # GET/s per prefix we plan for (S3 serves ~5,500 GET/s per prefix)
MANY_RANKS = 8  # [CPP] "many nodes hit one prefix"
FILE_MODE_MB_S = 200.0  # [SRC] File mode download ~200 MB/s
FASTFILE_LIST_OBJECTS_S = 5_500.0  # [SRC] FastFile lists ~5,500 objects/s
GET_PRICE_PER_MILLION = 0.40  # [SRC] 1 M GET requests ~$0.40
EFS_BASELINE_MB_S_PER_TB = 150.0  # [SRC] EFS bursting baseline
FSX_USD_PER_TB_MONTH, FSX_MIN_TB = 140.0, 1.2  # [SRC] FSx Scratch 2
S3_USD_PER_TB_MONTH = 23.0  # [SRC]
FSX_INDEX_OBJECTS_PER_HOUR = 2_000_000.0  # [SRC] indexing ~2 M objects takes about an hour
HEADROOM = 1.2  # loader must beat the consumer by 20%
# A measured difference between two sweep points counts only beyond this ratio: the trial's
# points are a few seconds each, and repeated points on the 2-core dev machine differ by ~10%.
MEASURED_GAIN = 1.10
# At 0 workers the main thread busy at most this share of a sample's time: the reader's own
# thread does the loading, so workers would add processes and memory, not throughput.
IO_BOUND_MAIN_SHARE = 0.5
# ... unless the reader's byte budget holds fewer objects than this: then the budget, not the
# main thread, bounds one process, and each worker process brings a budget of its own (200 MB
# objects in 256 MiB: measured 0 workers ahead in the trial, 2 workers ahead in the sweep).
BUDGET_OBJECTS_FOR_TIE = 2
TOLERANCE = 0.05  # "within 5% of the best"
MAX_SEARCH_WORKERS = 32  # the model's search range when cores do not bound it
DEFAULT_WORKER_RSS_BYTES = 400 * MB  # a forked worker holding torch and the dataset object
RAM_FRACTION_FOR_WORKERS = 0.75  # leave a quarter of available RAM for the main process
PREFETCH_MIN, PREFETCH_MAX = 2, 8
PINNED_GAIN = 1.1  # pinned copies must be >= 10% faster to be worth the locked memory
SHM_FRACTION = 0.5  # in-flight batches may use at most half of /dev/shm

# CPU seconds per sample by format when the trial did not time the decoder (low confidence).
DEFAULT_CPU_S_PER_SAMPLE: dict[str, float] = {
    "jpeg": 0.004,
    "png": 0.006,
    "tar": 0.004,  # WebDataset shards mostly hold images
    "recordio": 0.004,
    "tfrecord": 0.002,
    "mds": 0.002,
    "parquet": 0.0002,
    "npy": 0.0002,
    "jsonl": 0.00005,
    "text": 0.00005,
}
DEFAULT_CPU_S = 0.001


@dataclass(frozen=True)
class Finding:
    """What a rule concluded: the value for its key, why, and the numbers it used (with units)."""

    rule_id: str
    key: str
    value: Any
    rationale: str
    evidence: dict[str, Any] = field(default_factory=dict)
    measured: bool = False
    confidence: str = "medium"  # "high" (trial measurement), "medium", "low" (defaults only)


@dataclass(frozen=True)
class Context:
    """The facts every rule may read: the inputs plus quantities derived from them."""

    profile: DatasetProfile
    hardware: HardwareProfile
    workload: Workload
    trial: TrialResult | None = None
    data_fs: str | None = None  # file system type of a local data path ("nfs4", "ext4", ...)

    # --- the job ------------------------------------------------------------------------------

    @property
    def ranks(self) -> int:
        return self.workload.ranks

    @property
    def ranks_per_node(self) -> int:
        return self.workload.gpus_per_node

    @property
    def consumer_rate(self) -> float | None:
        return self.workload.consumer_rate

    @property
    def has_gpu(self) -> bool:
        return self.hardware.has_gpu

    # --- the data -----------------------------------------------------------------------------

    @property
    def p50_bytes(self) -> int:
        return self.profile.sizes.p50

    @property
    def total_bytes(self) -> int:
        return self.profile.total_bytes

    @cached_property
    def samples_per_object(self) -> float:
        count, samples = self.profile.object_count, self.profile.samples_estimate
        return samples / count if count > 0 and samples > 0 else 1.0

    @property
    def object_bytes(self) -> float:
        return self.profile.mean_object_bytes

    @property
    def stored_bytes_per_sample(self) -> float:
        return self.object_bytes / self.samples_per_object

    @property
    def samples_per_rank(self) -> float:
        return self.profile.samples_estimate / self.ranks

    @property
    def batch_bytes(self) -> float:
        """Bytes of one decoded batch (decoder output when measured, else stored bytes)."""
        per_sample = self.stored_bytes_per_sample
        if self.trial is not None and self.trial.decode is not None:
            per_sample = self.trial.decode.bytes_per_sample
        return per_sample * self.workload.batch_size

    @property
    def cpu_s_per_sample(self) -> float:
        if self.trial is not None and self.trial.decode is not None:
            return self.trial.decode.cpu_s_per_sample
        return DEFAULT_CPU_S_PER_SAMPLE.get(self.profile.dominant_format, DEFAULT_CPU_S)

    @property
    def cpu_measured(self) -> bool:
        return self.trial is not None and self.trial.decode is not None

    @property
    def on_network_fs(self) -> bool:
        loc = self.workload.data_location
        uri = self.profile.uri.lower()
        return (
            loc in ("efs", "nfs")
            or uri_scheme(uri) in ("efs", "nfs")
            or (
                self.profile.storage == "local"
                and (self.data_fs or "") in NETWORK_FILESYSTEMS
                and not self.on_fsx
            )
        )

    @property
    def on_fsx(self) -> bool:
        loc = self.workload.data_location
        return loc == "fsx" or (self.profile.storage == "local" and self.data_fs == "lustre")

    @property
    def in_s3(self) -> bool:
        loc = self.workload.data_location
        if loc is not None:
            return loc == "s3"
        return self.profile.storage == "s3"

    # --- the machine --------------------------------------------------------------------------

    @property
    def cores_per_rank(self) -> int:
        return self.hardware.usable_cores // self.ranks_per_node

    def core_cap(self, state: Mapping[str, Any]) -> int:
        """[IO] workers up to CPU count - 1: one core stays with the main (training) process.

        Unless the trial measured a worker on every core clearly (MEASURED_GAIN) faster than the
        best worker count within that cap, for what the training reads: then the last core is
        worth it. (Between that point and 0 workers, NW-3 chooses on the measured rates.)
        """
        cap = max(self.cores_per_rank - 1, 0)
        rates = self.measured_rates(state)
        low = 0 if cap == 0 else 1
        within = max((r for w, r in rates.items() if low <= w <= cap), default=0.0)
        every_core = rates.get(self.cores_per_rank, 0.0)
        if within > 0 and every_core > within * MEASURED_GAIN:
            return self.cores_per_rank
        return cap

    @property
    def worker_rss_bytes(self) -> float:
        if self.trial is not None and self.trial.sweep:
            peak = max(p.peak_worker_rss_mb for p in self.trial.sweep)
            if peak > 0:
                return peak * MB
        return DEFAULT_WORKER_RSS_BYTES

    @property
    def ram_per_rank(self) -> float | None:
        avail = self.hardware.ram_available_bytes
        return None if avail is None else avail / self.ranks_per_node

    @property
    def ram_cap(self) -> int:
        """Workers whose memory fits: each is a process with its own dataset copy [IO]."""
        ram = self.ram_per_rank
        if ram is None:
            return MAX_SEARCH_WORKERS
        return max(int(ram * RAM_FRACTION_FOR_WORKERS // self.worker_rss_bytes), 0)

    @property
    def fits_local_disk(self) -> bool:
        disk = self.hardware.disk
        return disk is not None and disk.free_bytes >= 1.1 * self.total_bytes

    def local_storage(self) -> StorageParams:
        kind = self.hardware.disk.kind if self.hardware.disk else "unknown"
        return {
            "nvme": LOCAL_NVME_DEFAULTS,
            "hdd": HDD_DEFAULTS,
        }.get(kind, LOCAL_SSD_DEFAULTS)

    def measured_storage(self) -> StorageParams | None:
        probe = self.trial.storage if self.trial is not None else None
        if probe is None or probe.per_connection_mb_s <= 0:
            return None
        return StorageParams(
            name="measured",
            first_byte_s=min(max(probe.first_byte_p50_s, 0.0), 60.0),
            per_connection_mb_s=probe.per_connection_mb_s,
            requests_in_flight=S3_DEFAULTS.requests_in_flight,
            aggregate_mb_s=probe.best_mb_s if probe.concurrency_curve else None,
            measured=True,
        )

    def storage_for(self, source: str | None) -> StorageParams:
        """What one rank reads from, given the chosen data source.

        The aggregate ceiling (NIC, local device) belongs to the node: the ranks on a node share
        it, so each rank's model sees its share.
        """
        storage = self._node_storage_for(source)
        if storage.aggregate_mb_s is None or self.ranks_per_node == 1:
            return storage
        share = storage.aggregate_mb_s / self.ranks_per_node
        return dataclasses.replace(storage, aggregate_mb_s=share)

    def _node_storage_for(self, source: str | None) -> StorageParams:
        if source == "copy-local":
            measured = self.measured_storage() if self.profile.storage == "local" else None
            return measured or self.local_storage()
        if source == "shared-fs":
            measured = self.measured_storage() if self.on_fsx else None
            return measured or SHARED_FS_DEFAULTS
        if source == "efs":
            return self.measured_storage() or EFS_DEFAULTS
        return self.measured_storage() or S3_DEFAULTS

    def layout(self, state: Mapping[str, Any]) -> tuple[float, float]:
        """(object bytes, samples per object) the training reads: after resharding if planned."""
        if state.get("data_source") == "reshard-first":
            shard = float(state.get("shard_size_bytes") or SHARD_TARGET_BYTES)
            return shard, max(shard / max(self.stored_bytes_per_sample, 1.0), 1.0)
        return self.object_bytes, self.samples_per_object

    def training_source(self, state: Mapping[str, Any]) -> str | None:
        source = state.get("data_source")
        return state.get("after_reshard", "stream") if source == "reshard-first" else source

    def model_rates(
        self, state: Mapping[str, Any], workers: range, cores: int | None = None
    ) -> dict[int, float]:
        return {w: self.model(state, w, cores).samples_per_s for w in workers}

    def model(
        self, state: Mapping[str, Any], num_workers: int, cores: int | None = None
    ) -> Prediction:
        """The model's Prediction for `num_workers` (cores per rank unless `cores` is given)."""
        object_bytes, spo = self.layout(state)
        storage = self.storage_for(self.training_source(state))
        if storage.requests_in_flight > 1 and "requests_in_flight" in state:
            storage = dataclasses.replace(
                storage, requests_in_flight=int(state["requests_in_flight"])
            )
        return predict(
            num_workers,
            object_bytes=object_bytes,
            samples_per_object=spo,
            cpu_s_per_sample=self.cpu_s_per_sample,
            usable_cores=max(self.cores_per_rank, 1) if cores is None else cores,
            storage=storage,
        )

    def reads_as_trialled(self, state: Mapping[str, Any]) -> bool:
        """True when training reads the objects where (and as) the trial read them."""
        source = state.get("data_source")
        if source == "reshard-first":
            return False  # other objects (packed shards)
        if source == "copy-local":
            return self.profile.storage == "local"  # a local set read in place
        if source == "shared-fs":
            return self.on_fsx
        return True  # stream / efs: the data stays where the trial read it

    def measured_rates(self, state: Mapping[str, Any] | None = None) -> dict[int, float]:
        """Best measured samples/s per num_workers in the trial's sweep.

        A point that reached no steady state (`LoaderPoint.steady`) measured a lower bound,
        start-up included: it counts only where it beats every steady point (its count is at
        least that fast); below them it would stand for a count slower than the trial showed,
        so it is left out (`lower_bounds_left_out`).
        With `state`, only when the training reads what the trial read (else empty).
        """
        if state is not None and not self.reads_as_trialled(state):
            return {}
        rates: dict[int, float] = {}
        for p in self._sweep_points():
            if p.steady or p.samples_per_s > self._best_steady_rate:
                rates[p.num_workers] = max(rates.get(p.num_workers, 0.0), p.samples_per_s)
        return rates

    def lower_bounds_left_out(self) -> dict[int, float]:
        """num_workers whose only measurement was a lower bound below the steady points."""
        kept = self.measured_rates()
        return {
            p.num_workers: p.samples_per_s
            for p in self._sweep_points()
            if not p.steady and p.num_workers not in kept
        }

    def _sweep_points(self) -> list[LoaderPoint]:
        sweep = self.trial.sweep if self.trial is not None else ()
        return [p for p in sweep if p.samples_per_s > 0]

    @cached_property
    def _best_steady_rate(self) -> float:
        return max((p.samples_per_s for p in self._sweep_points() if p.steady), default=0.0)

    def unconstrained_workers(self, state: Mapping[str, Any]) -> int:
        """The workers the throughput alone asks for, before cores and RAM bound it."""
        measured = {w: r for w, r in self.measured_rates(state).items() if w >= 1}
        if measured:
            return choose_workers(measured, self.consumer_rate, headroom=HEADROOM)
        # as if every worker had a core of its own: what the data and storage ask for
        rates = self.model_rates(state, range(1, MAX_SEARCH_WORKERS + 1), MAX_SEARCH_WORKERS + 1)
        return choose_workers(rates, self.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)

    def zero_measured_ahead(self, state: Mapping[str, Any]) -> bool:
        """The trial measured 0 workers at least `zero_lead` x every worker count within
        cores - 1 (what NW-3 would choose from otherwise), or x every worker count when none
        was measured there.

        With a consumer rate c, as the training would see it: with workers, loading and the
        step overlap (min(r, c)); with 0 workers, the loader's work in the main thread (its
        measured CPU per sample, m) and the step take turns while the reader's own thread
        fetches on, so a sample takes max(1/r0, m + 1/c). Without a measured m, all of 1/r0
        takes turns: 1 / (1/r0 + 1/c).
        """
        rates = self.measured_rates(state)
        if 0 not in rates:
            return False
        zero = rates[0]
        guided = max(self.cores_per_rank - 1, 1)
        with_workers = {w: r for w, r in rates.items() if 1 <= w <= guided} or {
            w: r for w, r in rates.items() if w >= 1
        }
        if not with_workers:
            # only 0 measured: nothing to compare a bare loader with; with a step, no evidence
            return self.consumer_rate is None
        best = max(self.workers_as_trained(with_workers))
        return self.zero_as_trained(zero) >= best * self.zero_lead(zero)

    def zero_lead(self, zero_rate: float) -> float:
        """How far 0 workers must lead the worker counts: MEASURED_GAIN, so that a tie (or
        noise) goes to workers; but when the main thread was busy at most IO_BOUND_MAIN_SHARE
        of each sample's time at 0 workers, the reader's thread does the loading and a tie goes
        to 0 workers (no worker processes, copies or memory): within 1 / MEASURED_GAIN. Not
        when the reader's byte budget holds under BUDGET_OBJECTS_FOR_TIE objects: the budget
        bounds one process then, and each worker reads with a budget of its own."""
        main_idle = self.zero_main_cpu_s(zero_rate) <= IO_BOUND_MAIN_SHARE / zero_rate
        if main_idle and not self.budget_bound:
            return 1 / MEASURED_GAIN
        return MEASURED_GAIN

    @property
    def trial_budget_bytes(self) -> int:
        """The byte budget (max_inflight_bytes) per process the trial's sweep read with."""
        budget = self.trial.inflight_bytes if self.trial is not None else None
        return budget or READER_BUDGET_BYTES

    @property
    def budget_bound(self) -> bool:
        """In the trial, one process's reader held under BUDGET_OBJECTS_FOR_TIE of the objects
        in its byte budget: the budget, not the requests, bounded what it fetched."""
        return self.object_bytes * BUDGET_OBJECTS_FOR_TIE > self.trial_budget_bytes

    def workers_as_trained(self, rates: Mapping[int, float]) -> list[float]:
        """Samples/s the training gets from each worker count: at most the consumer's rate."""
        c = self.consumer_rate
        return [r if c is None else min(r, c) for r in rates.values()]

    def zero_as_trained(self, zero_rate: float) -> float:
        """Samples/s the training gets from the 0-worker point (see `zero_measured_ahead`)."""
        c = self.consumer_rate
        if c is None:
            return zero_rate
        return 1 / max(1 / zero_rate, self.zero_main_cpu_s(zero_rate) + 1 / c)

    def zero_main_cpu_s(self, zero_rate: float) -> float:
        """Main-thread CPU seconds per sample of the 0-worker point that measured `zero_rate`
        (1 / zero_rate, all of a sample's time, when not measured)."""
        for p in self.trial.sweep if self.trial is not None else ():
            measured = p.main_cpu_s_per_sample
            if p.num_workers == 0 and p.samples_per_s == zero_rate and measured is not None:
                return min(measured, 1 / zero_rate)
        return 1 / zero_rate

    def zero_on_merit(self, state: Mapping[str, Any]) -> bool:
        """0 workers measured ahead where that can be judged: a CPU-only run without a consumer
        rate (the loader's rate is all that counts), or any run with one."""
        judged = self.consumer_rate is not None or not self.has_gpu
        return judged and self.zero_measured_ahead(state)

    def zero_workers_allowed(self, state: Mapping[str, Any]) -> bool:
        """num_workers=0 loads inside the training loop, so loading and compute never overlap.

        It is a candidate only when no core is free for a worker, or on its measured merit.
        """
        return self.workers_cap(state) == 0 or self.zero_on_merit(state)

    def workers_cap(self, state: Mapping[str, Any]) -> int:
        return min(
            state.get("workers_cap_cores", self.core_cap(state)),
            state.get("workers_cap_ram", self.ram_cap),
        )


def _gb(n: float) -> str:
    return f"{n / GB:,.1f} GB" if n >= GB else f"{n / MB:,.1f} MB"


class Rule:
    """Base of all rules: metadata as class attributes, a pure `evaluate`."""

    id: ClassVar[str]
    name: ClassVar[str]
    decision: ClassVar[str]  # the Recommendation decision this rule contributes to
    key: ClassVar[str]  # the state value it sets (advisory rules use their own id)
    source: ClassVar[str]

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        raise NotImplementedError

    def finding(self, value: Any, rationale: str, **kwargs: Any) -> Finding:
        return Finding(self.id, self.key, value, rationale, **kwargs)


# ---------------------------------------------------------------------------------------------
# Data source


class DataAlreadyOnSharedFs(Rule):
    """Symptom: the data already lives on EFS/NFS (or FSx for Lustre).

    Recommendation: read it where it is (EFS input / FSx input); do not copy it to S3 first.
    Why: [SRC] decision flow step 1, "data already on EFS -> EFS".
    """

    id = "SRC-1"
    name = "data already on a shared file system"
    decision = "data_source"
    key = "data_source"
    source = "[SRC] 3. Decision flow 1: data already on EFS -> EFS"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        where = {"location": ctx.workload.data_location, "filesystem": ctx.data_fs}
        if ctx.on_network_fs:
            return self.finding(
                "efs", "The data already lives on EFS/NFS: train from there.", evidence=where
            )
        if ctx.on_fsx:
            return self.finding(
                "shared-fs",
                "The data already lives on FSx for Lustre: train from it.",
                evidence=where,
            )
        return None


class DataAlreadyLocal(Rule):
    """Symptom: the data set is a path on a local disk of the training machine.

    Recommendation: read it in place; nothing to copy.
    Why: [IO] local NVMe/disk is much faster than EBS or S3 once the data is there.
    """

    id = "SRC-2"
    name = "data already on local disk"
    decision = "data_source"
    key = "data_source"
    source = "[IO] 2. local NVMe instance storage is much faster once the data is copied there"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.workload.data_location not in (None, "local") or ctx.profile.storage != "local":
            return None
        return self.finding(
            "copy-local",
            "The data is already on a local file system: read it in place, no copy needed.",
            evidence={"filesystem": ctx.data_fs, "total_bytes": ctx.total_bytes},
        )


class VeryLargeSharedSet(Rule):
    """Symptom: >= 10 TB read by a multi-node job, or >= 10 TB of small files.

    Recommendation: a shared parallel file system / distributed cache (FSx for Lustre, Alluxio).
    Why: [ORC] a distributed cache is worth it for >= 10 TB, many small files, distributed training;
    [SRC] step 4, too large for File mode -> FSx for Lustre.
    """

    id = "ORC-1"
    name = "very large set, distributed or small files"
    decision = "data_source"
    key = "data_source"
    source = "[ORC] 4. worth it when distributed, >= 10 TB, many small files; [SRC] 3. step 4"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        small = ctx.p50_bytes < SMALL_FILE_BYTES
        if ctx.total_bytes < SHARED_CACHE_BYTES or not (ctx.workload.nodes > 1 or small):
            return None
        why = "a multi-node job" if ctx.workload.nodes > 1 else "many small files"
        return self.finding(
            "shared-fs",
            f"{_gb(ctx.total_bytes)} read by {why}: copying it to every node is too slow and "
            "streaming every small object from S3 is request-bound; a shared parallel file "
            "system or distributed cache serves all nodes and jobs.",
            evidence={
                "total_bytes": ctx.total_bytes,
                "p50_object_bytes": ctx.p50_bytes,
                "nodes": ctx.workload.nodes,
            },
        )


class ManySmallFiles(Rule):
    """Symptom: >= 100,000 objects with a median under 1 MB.

    Recommendation: pack them into ~150 MB containers (WebDataset tar, TFRecord, RecordIO) first.
    Why: [IO] 2 M x 5 KB takes hours, 2,000 x 5 MB minutes; [SRC] step 2, serialize small files.
    """

    id = "SRC-3"
    name = "many small files"
    decision = "data_source"
    key = "data_source"
    source = "[IO] 2. small files are slow, pack into 1-128 MB; [SRC] 3. step 2 ~150 MB containers"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        count = ctx.profile.object_count
        if count < MANY_FILES or ctx.p50_bytes >= SMALL_FILE_BYTES:
            return None
        list_s = count / FASTFILE_LIST_OBJECTS_S
        return self.finding(
            "reshard-first",
            f"{count:,} objects with a median of {ctx.p50_bytes / 1e3:,.0f} KB: every GET pays "
            "the first-byte latency for little payload, and listing alone takes "
            f"{list_s / 60:,.0f} min. Pack them into ~150 MB shards before training.",
            evidence={
                "object_count": count,
                "p50_object_bytes": ctx.p50_bytes,
                "listing_s": round(list_s, 1),
            },
        )


class SmallSetCopyLocal(Rule):
    """Symptom: the set is under ~100 GB and fits the local disk.

    Recommendation: copy it to local disk/NVMe before training (SageMaker File mode); with a single
    pass over large containers, stream instead (the copy would be pure start-up delay).
    Why: [SRC] step 2, small sets -> File mode; [IO] File mode is faster when read many times.
    """

    id = "SRC-4"
    name = "small set fits local disk"
    decision = "data_source"
    key = "data_source"
    source = "[SRC] 3. step 2: small (< 50-100 GB) -> File mode; [IO] 2. File mode when read often"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if not ctx.in_s3 or ctx.total_bytes > SMALL_SET_BYTES or not ctx.fits_local_disk:
            return None
        if ctx.workload.epochs == 1 and ctx.p50_bytes >= LARGE_FILE_BYTES:
            return None  # one pass over large shards: streaming costs no start-up (SRC-5)
        copy_s = ctx.total_bytes / (FILE_MODE_MB_S * MB)
        disk = ctx.hardware.disk
        return self.finding(
            "copy-local",
            f"{_gb(ctx.total_bytes)} fits the local disk; copying takes about {copy_s / 60:,.0f} "
            f"min at ~200 MB/s and every epoch after that reads local {disk.kind if disk else ''} "
            "storage.",
            evidence={
                "total_bytes": ctx.total_bytes,
                "disk_free_bytes": disk.free_bytes if disk else None,
                "copy_s": round(copy_s, 1),
                "epochs": ctx.workload.epochs,
            },
        )


class StreamFromS3(Rule):
    """Symptom: data on S3 that is large, or read once in large containers.

    Recommendation: stream with the native reader (SageMaker FastFile).
    Why: [SRC] step 3, larger data with large files -> FastFile; large files are GPU-bound in all
    modes and FastFile starts fastest; [CPP] the native reader streams without the GIL.
    """

    id = "SRC-5"
    name = "stream from S3"
    decision = "data_source"
    key = "data_source"
    source = "[SRC] 3. step 3: larger data with large files -> FastFile; [CPP] 1. native reader"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if not ctx.in_s3:
            return None
        if ctx.total_bytes > SMALL_SET_BYTES:
            why = f"{_gb(ctx.total_bytes)} is too large to copy before training"
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
    """Symptom: the set will be resharded first.

    Recommendation: then copy the shards locally if the set is small and read several times, else
    stream them.
    Why: [SRC] steps 2 and 3 applied to the packed set.
    """

    id = "SRC-6"
    name = "source after resharding"
    decision = "data_source"
    key = "after_reshard"
    source = "[SRC] 3. steps 2-3 applied to the ~150 MB containers"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if state.get("data_source") != "reshard-first":
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
    """Symptom: training reads EFS faster than its bursting baseline allows for the set's size.

    Recommendation: EFS provisioned throughput (up to 3,072 MB/s read), or Max I/O for many
    workers; else expect the loader to slow down once burst credits run out.
    Why: [SRC] EFS bursting gives ~150 MB/s baseline per TB stored; the job's byte rate is
    consumer rate x bytes per sample x ranks.
    """

    id = "SRC-7"
    name = "EFS baseline throughput too low"
    decision = "data_source"
    key = "SRC-7"
    source = "[SRC] 3. EFS: bursting 150 MB/s baseline per TB; provisioned up to 3,072 MB/s"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if state.get("data_source") != "efs" or ctx.consumer_rate is None:
            return None
        need_mb_s = ctx.consumer_rate * ctx.stored_bytes_per_sample * ctx.ranks / MB
        baseline_mb_s = EFS_BASELINE_MB_S_PER_TB * ctx.total_bytes / TB
        if need_mb_s <= baseline_mb_s:
            return None
        return self.finding(
            "provisioned-throughput",
            f"The job reads ~{need_mb_s:,.0f} MB/s but EFS bursting sustains only "
            f"~{baseline_mb_s:,.1f} MB/s for {_gb(ctx.total_bytes)} stored: use provisioned "
            "throughput (or Max I/O mode for many workers).",
            evidence={"need_mb_s": round(need_mb_s, 1), "baseline_mb_s": round(baseline_mb_s, 1)},
        )


class CacheAfterFirstEpoch(Rule):
    """Symptom: streaming a set that fits the local disk, for several epochs.

    Recommendation: cache objects locally during the first epoch; read the cache afterwards.
    Why: [CPP] local caching after the first epoch; [ORC] overlap loading with training.
    """

    id = "CACHE-1"
    name = "cache locally after the first epoch"
    decision = "data_source"
    key = "cache_locally"
    source = "[CPP] 1. next steps: local caching after the first epoch; [ORC] 4."

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.training_source(state) != "stream" or ctx.workload.epochs < 2:
            return None
        if not ctx.fits_local_disk:
            return None
        return self.finding(
            True,
            f"{ctx.workload.epochs} epochs over a set that fits the local disk: the first epoch "
            "streams and fills a local cache, the others read it.",
            evidence={"epochs": ctx.workload.epochs, "total_bytes": ctx.total_bytes},
        )


# ---------------------------------------------------------------------------------------------
# The native reader's requests in flight


class ReaderRequestsInFlight(Rule):
    """Symptom: the training streams objects, each a GET with a first-byte latency.

    Recommendation: the native reader's `max_inflight_requests` per loader process. With a trial
    that read the data as training will, the value its DataLoader sweep used (the measured rates
    hold for it). Otherwise Little's law on the storage's first-byte latency and bandwidth, for the
    rate one process may have to deliver (the consumer's with 20% headroom, at most what one
    process takes in: PROCESS_OBJECTS_S objects or PROCESS_MB_S of bytes a second, and what its
    measured transform lets through), twice for jitter, between the reader's default and
    INFLIGHT_MAX.
    Why: [CPP] the reader's concurrency should be exposed and tuned; each open request completes
    1 / (first byte + transfer) objects/s, so latency, not cores, bounds a process with too few.
    """

    id = "RD-1"
    name = "requests in flight per reader"
    decision = "requests_in_flight"
    key = "requests_in_flight"
    source = "[CPP] expose the reader's concurrency; measured: first-byte latency (Little's law)"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.training_source(state) != "stream":
            return None  # local and shared file systems: the reader's default
        trial = ctx.trial
        if trial is not None and trial.requests_in_flight and ctx.reads_as_trialled(state):
            k = trial.requests_in_flight
            probe = trial.storage
            latency = f" at {probe.first_byte_p50_s * 1000:,.0f} ms to first byte" if probe else ""
            return self.finding(
                k,
                f"{k} requests in flight per process{latency}: the setting the trial's DataLoader "
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
                f"Objects of {_gb(object_bytes)} are read as parallel {READER_PART_BYTES >> 20} "
                f"MiB parts within the reader's byte budget: its default {k} requests in flight."
            )
        else:
            rationale = (
                f"Each GET is open ~{fetch_ms:,.0f} ms; {target:,.0f} objects/s per process need "
                f"~{target * fetch_ms / 1e3:,.0f} open requests (Little's law), so {k} in flight "
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
    """Symptom: the training streams objects so large that the reader's default byte budget
    holds fewer than BUDGET_OBJECTS of them.

    Recommendation: the native reader's `max_inflight_bytes` per loader process. With a trial
    that read the data as training will, the budget its DataLoader sweep used; else
    BUDGET_OBJECTS objects in whole parts, the budgets of cores + 1 processes within
    BUDGET_RAM_SHARE of the rank's available RAM.
    Why: Little's law on bytes: requests in flight plus results not yet consumed reserve the
    budget, so it must hold one object the consumer holds, one waiting and two in flight, or the
    reader idles between large objects. Measured: 200 MB objects, 0 workers, 768 MiB against
    256 MiB.
    """

    id = "RD-2"
    name = "bytes in flight per reader"
    decision = "inflight_bytes"
    key = "inflight_bytes"
    source = "[CPP] expose the reader's concurrency; measured: 200 MB objects at 768 vs 256 MiB"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.training_source(state) != "stream":
            return None  # local and shared file systems: the reader's default
        object_bytes, _ = ctx.layout(state)
        trial = ctx.trial
        if trial is not None and trial.inflight_bytes and ctx.reads_as_trialled(state):
            budget, measured = trial.inflight_bytes, True
        else:
            hw = ctx.hardware
            budget = inflight_bytes(
                object_bytes, hw.ram_available_bytes, hw.usable_cores, ctx.ranks_per_node
            )
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
            f"Objects of {_gb(object_bytes)} fill the reader's default "
            f"{READER_BUDGET_BYTES >> 20} MiB byte budget, which in-flight parts and results "
            f"waiting for the consumer share: {budget >> 20} MiB per process holds "
            f"{held:,.1f} of them ({how}).",
            evidence={"object_bytes": object_bytes, "inflight_bytes": budget},
            measured=measured,
            confidence="high" if measured else "medium",
        )


# ---------------------------------------------------------------------------------------------
# DataLoader workers


class WorkersCappedByCores(Rule):
    """Symptom: throughput wants more workers than the cores allow.

    Recommendation: at most (cores per rank - 1) workers; one core stays with the main process.
    Why: [IO] "scale up to CPU count - 1".
    """

    id = "NW-1"
    name = "cores bound the workers"
    decision = "num_workers"
    key = "workers_cap_cores"
    source = "[IO] 2. DataLoader workers: scale up to (CPU count - 1)"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        wanted = ctx.unconstrained_workers(state)
        cap = ctx.core_cap(state)
        if wanted <= cap:
            return None
        why = (
            "the trial measured a worker on every core clearly faster"
            if cap == ctx.cores_per_rank
            else "one core stays with the training process"
        )
        return self.finding(
            cap,
            f"Throughput alone would use {wanted} workers, but {ctx.cores_per_rank} core(s) per "
            f"rank allow {cap} ({why}). More cores per rank would help.",
            evidence={
                "usable_cores": ctx.hardware.usable_cores,
                "ranks_per_node": ctx.ranks_per_node,
                "workers_wanted": wanted,
            },
            confidence="high",
        )


class WorkersCappedByRam(Rule):
    """Symptom: the workers' memory would exceed the available RAM.

    Recommendation: fewer workers (or a bigger instance).
    Why: [IO] each worker is a process with its own copy of the dataset; memory grows linearly.
    """

    id = "NW-2"
    name = "RAM bounds the workers"
    decision = "num_workers"
    key = "workers_cap_ram"
    source = "[IO] 2. memory grows linearly with workers; OOM -> fewer workers"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        wanted = min(ctx.unconstrained_workers(state), state.get("workers_cap_cores", 1 << 30))
        if ctx.ram_cap >= wanted:
            return None
        return self.finding(
            ctx.ram_cap,
            f"Each worker holds ~{ctx.worker_rss_bytes / MB:,.0f} MB; "
            f"{_gb(ctx.ram_per_rank or 0)} available per rank fits {ctx.ram_cap} worker(s).",
            evidence={
                "ram_available_bytes": ctx.hardware.ram_available_bytes,
                "worker_rss_bytes": ctx.worker_rss_bytes,
                "workers_wanted": wanted,
            },
            measured=bool(ctx.trial and ctx.trial.sweep),
        )


class WorkersFromSweep(Rule):
    """Symptom: the trial measured a DataLoader sweep.

    Recommendation: within the core and RAM caps, 0 workers when no core is free, or when it
    measured at least 10% faster than every worker count within cores - 1 and faster than every
    count within the caps, for a CPU-only run without a consumer rate or for any run with one
    (within 10% of them is enough when the main thread was busy at most half of each sample's
    time at 0 workers: the reader's thread does the loading, workers would add only overhead;
    but not when the reader's byte budget holds under two objects: it bounds one process then,
    and each worker brings a budget of its own);
    else the smallest measured num_workers that beats the consumer by 20%, else the smallest
    within 5% of the best measured point. With a consumer rate, 0 workers is judged as training
    sees it: the loader's main-thread work and the step take turns while the reader's thread
    fetches on, a sample every max(1/r0, main CPU per sample + 1/consumer) seconds, against
    min(r, consumer) for workers. With 0 workers loading runs inside the training loop and uses
    one core, so a tie (or noise) goes to workers unless the main thread was mostly idle.
    A count that reached no steady state within the trial (a lower bound) counts only where it
    beats every steady count, else it is left out and named; with any lower bound in the sweep
    the confidence is medium.
    Why: measured samples/s per num_workers.
    """

    id = "NW-3"
    name = "workers from the measured sweep"
    decision = "num_workers"
    key = "num_workers"
    source = "measured: trial sweep samples/s per num_workers"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        cap = ctx.workers_cap(state)
        low = 0 if ctx.zero_workers_allowed(state) else 1
        rates = {w: r for w, r in ctx.measured_rates(state).items() if low <= w <= cap}
        if not rates:
            return None
        workers = {k: r for k, r in rates.items() if k >= 1}
        # 0 on its merit (or no core free) and also ahead of every worker count allowed (within
        # noise of them when the main thread was mostly idle, see Context.zero_lead)
        lead = min(ctx.zero_lead(rates[0]), 1.0) if 0 in rates else 1.0
        if 0 in rates and (
            not workers
            or ctx.zero_as_trained(rates[0]) >= max(ctx.workers_as_trained(workers)) * lead
        ):
            w = 0
        else:
            w = choose_workers(workers, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)
        if w == 0 and workers:
            rationale = _zero_rationale(ctx, rates[0], workers)
        else:
            rationale = _workers_rationale(w, rates, ctx.consumer_rate, "measured")
            zero = ctx.measured_rates(state).get(0)
            if zero is not None and _budget_broke_tie(ctx, zero, workers):
                rationale += (
                    f" 0 workers read {_per_s(zero)} samples/s with the main thread mostly idle, "
                    f"within {MEASURED_GAIN - 1:.0%} of that; but objects of "
                    f"{_gb(ctx.object_bytes)} fill the reader's {ctx.trial_budget_bytes >> 20} MiB "
                    "byte budget: each worker process reads with a budget of its own, so the tie "
                    "goes to workers."
                )
        sweep = ctx.trial.sweep if ctx.trial is not None else ()
        unsteady = ctx.lower_bounds_left_out()
        if unsteady:
            rationale += (
                f" Left out: num_workers={', '.join(map(str, sorted(unsteady)))} reached no steady "
                "state within the trial (a lower bound, start-up included, below the other "
                f"counts); a longer trial measures {'it' if len(unsteady) == 1 else 'them'}."
            )
        elif not any(p.steady for p in sweep):
            rationale += (
                " No count reached a steady state within the trial: these rates include "
                "start-up (lower bounds); a longer trial measures them."
            )
        return self.finding(
            w,
            rationale,
            evidence={
                "measured_samples_per_s": {str(k): round(v, 1) for k, v in sorted(rates.items())},
                "lower_bounds_left_out": {str(k): round(v, 1) for k, v in sorted(unsteady.items())},
                "consumer_rate_samples_per_s": ctx.consumer_rate,
                "cap": cap,
            },
            measured=True,
            confidence="high" if all(p.steady for p in sweep) else "medium",
        )


class WorkersFromModel(Rule):
    """Symptom: no measured sweep (or none within the caps).

    Recommendation: the smallest num_workers whose predicted throughput beats the consumer by 20%,
    else the smallest within 5% of the best prediction, within the caps; at least 1 when a core is
    free, because with 0 workers loading and training never overlap.
    Why: the throughput model (advisor/model.py) on measured or default storage and CPU numbers.
    """

    id = "NW-4"
    name = "workers from the throughput model"
    decision = "num_workers"
    key = "num_workers"
    source = "model: first-byte latency, bandwidth, CPU per sample, cores (advisor/model.py)"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        cap = ctx.workers_cap(state)
        rates = ctx.model_rates(state, range(min(1, cap), cap + 1))
        w = choose_workers(rates, ctx.consumer_rate, headroom=HEADROOM, tolerance=TOLERANCE)
        storage = ctx.storage_for(ctx.training_source(state))
        measured_inputs = storage.measured or ctx.cpu_measured
        return self.finding(
            w,
            _workers_rationale(w, rates, ctx.consumer_rate, "predicted"),
            evidence={
                "predicted_samples_per_s": {str(k): round(v, 1) for k, v in rates.items()},
                "bottleneck": ctx.model(state, w).bottleneck,
                "first_byte_s": storage.first_byte_s,
                "per_connection_mb_s": storage.per_connection_mb_s,
                "cpu_s_per_sample": ctx.cpu_s_per_sample,
                "cap": cap,
            },
            confidence="medium" if measured_inputs else "low",
        )


def _per_s(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"


def _budget_broke_tie(ctx: Context, zero: float, workers: Mapping[int, float]) -> bool:
    """0 workers would have won as an I/O-bound tie but for the reader's byte budget."""
    if not ctx.budget_bound or ctx.zero_main_cpu_s(zero) > IO_BOUND_MAIN_SHARE / zero:
        return False
    best = max(ctx.workers_as_trained(workers))
    return ctx.zero_as_trained(zero) * MEASURED_GAIN >= best


def _zero_rationale(ctx: Context, zero: float, workers: Mapping[int, float]) -> str:
    best_w = max(workers, key=lambda k: workers[k])
    main_ms = ctx.zero_main_cpu_s(zero) * 1e3
    text = f"0 workers: {_per_s(zero)} samples/s measured, against {_per_s(workers[best_w])} "
    text += f"with {best_w} worker(s)."
    if ctx.zero_lead(zero) < 1:
        text += (
            f" The main thread was busy {main_ms:,.2f} ms of each sample's {1e3 / zero:,.2f} ms "
            "while the reader's own thread fetched: workers would add processes and memory, "
            f"not throughput, so 0 workers needs no lead (within {MEASURED_GAIN - 1:.0%} is "
            "enough)."
        )
    else:
        text += (
            f" That is over {MEASURED_GAIN - 1:.0%} ahead of the worker counts within cores - 1."
        )
    if ctx.consumer_rate is not None:
        text += (
            f" In training the loader's {main_ms:,.2f} ms of main-thread work per sample and the "
            "step take turns while the reader fetches on: "
            f"~{ctx.zero_as_trained(zero):,.1f} samples/s."
        )
    return text


def _workers_rationale(
    w: int, rates: Mapping[int, float], consumer: float | None, kind: str
) -> str:
    best = max(rates.values())
    if len(rates) == 1:
        return f"{w} worker(s), the only choice within the caps: {rates[w]:,.0f} samples/s."
    if consumer is not None and rates[w] >= consumer * HEADROOM:
        return (
            f"{w} worker(s) deliver {rates[w]:,.0f} samples/s ({kind}), at least 1.2x the "
            f"{consumer:,.0f} samples/s the GPU consumes; more workers would only cost memory."
        )
    return (
        f"{w} worker(s) deliver {rates[w]:,.0f} samples/s ({kind}), within 5% of the best "
        f"{best:,.0f} samples/s over {min(rates)}-{max(rates)} workers."
    )


# ---------------------------------------------------------------------------------------------
# prefetch_factor, shared memory, pin_memory


def _expected_rate(ctx: Context, state: Mapping[str, Any]) -> float:
    w = state.get("num_workers", 0)
    return ctx.measured_rates(state).get(w) or ctx.model(state, w).samples_per_s


class NoPrefetchWithoutWorkers(Rule):
    """Symptom: num_workers == 0.

    Recommendation: prefetch_factor None (torch rejects a prefetch_factor without workers).
    Why: torch.utils.data.DataLoader raises ValueError for prefetch_factor with num_workers=0.
    """

    id = "PF-1"
    name = "no prefetch without workers"
    decision = "prefetch_factor"
    key = "prefetch_factor"
    source = "torch DataLoader contract: prefetch_factor only with num_workers > 0"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if state.get("num_workers", 0) != 0:
            return None
        return self.finding(
            None, "No workers: batches are loaded in the main process, nothing to prefetch."
        )


class PrefetchHidesLatency(Rule):
    """Symptom: workers wait for the first byte of each object.

    Recommendation: enough batches in flight per worker to cover the first-byte latency at the
    worker's rate: ceil(latency x rate per worker / batch) + 1, between 2 and 8.
    Why: measured (or default) first-byte latency and the expected samples/s.
    """

    id = "PF-2"
    name = "prefetch covers first-byte latency"
    decision = "prefetch_factor"
    key = "prefetch_factor"
    source = "measured: first-byte latency (p95) x samples/s per worker"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        w = state.get("num_workers", 0)
        if w <= 0:
            return None
        storage = ctx.storage_for(ctx.training_source(state))
        probe = ctx.trial.storage if ctx.trial is not None and storage.measured else None
        latency = probe.first_byte_p95_s if probe else 2 * storage.first_byte_s
        per_worker = _expected_rate(ctx, state) / w
        batches = latency * per_worker / ctx.workload.batch_size
        value = min(max(math.ceil(batches) + 1, PREFETCH_MIN), PREFETCH_MAX)
        return self.finding(
            value,
            f"A worker produces {per_worker:,.0f} samples/s; a {latency * 1e3:,.0f} ms stall "
            f"spans {batches:,.1f} batch(es) of {ctx.workload.batch_size}, so keep {value} "
            "batches in flight per worker.",
            evidence={
                "first_byte_p95_s": latency,
                "samples_per_s_per_worker": round(per_worker, 1),
                "batch_size": ctx.workload.batch_size,
            },
            measured=probe is not None,
            confidence="high" if probe is not None else "low",
        )


class SharedMemoryTooSmall(Rule):
    """Symptom: the batches in flight need more than half of /dev/shm.

    Recommendation: enlarge /dev/shm (docker --shm-size) or lower prefetch_factor / batch size.
    Why: measured /dev/shm size; workers hand batches to the main process through shared memory.
    """

    id = "SHM-1"
    name = "/dev/shm too small for batches in flight"
    decision = "prefetch_factor"
    key = "SHM-1"
    source = "measured: /dev/shm size (statvfs) vs workers x prefetch x batch bytes x ranks"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        w, pf, shm = (
            state.get("num_workers", 0),
            state.get("prefetch_factor"),
            ctx.hardware.shm_bytes,
        )
        if w <= 0 or pf is None or shm is None:
            return None
        need = ctx.ranks_per_node * w * pf * ctx.batch_bytes
        if need <= SHM_FRACTION * shm:
            return None
        size_gb = math.ceil(2 * need / GB)
        return self.finding(
            f"--shm-size={size_gb}g",
            f"{ctx.ranks_per_node} rank(s) x {w} workers x {pf} batches x "
            f"{_gb(ctx.batch_bytes)} = {_gb(need)} in flight, but /dev/shm is {_gb(shm)}: "
            f"workers can die with a bus error. Give the container at least {size_gb} GB of "
            "shared memory.",
            evidence={
                "shm_bytes": shm,
                "in_flight_bytes": round(need),
                "batch_bytes": ctx.batch_bytes,
            },
            measured=True,
            confidence="high",
        )


class NoGpuNoPin(Rule):
    """Symptom: no GPU (probed or planned).

    Recommendation: pin_memory False.
    Why: [IO] pinned memory only speeds host-to-device copies; without a GPU it only locks RAM.
    """

    id = "PIN-1"
    name = "no GPU, no pinned memory"
    decision = "pin_memory"
    key = "pin_memory"
    source = "[IO] 2. pinned memory speeds host-to-device copies"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.has_gpu:
            return None
        return self.finding(
            False,
            "No GPU on this machine and no target GPU given: pinned memory would only lock RAM "
            "(and torch warns). Plan for a GPU with a target GPU to get True.",
            evidence={"gpus": 0},
            confidence="high",
        )


class PinnedNotFaster(Rule):
    """Symptom: the trial measured pinned copies no faster than pageable ones.

    Recommendation: pin_memory False.
    Why: measured host-to-device GB/s, pinned vs pageable.
    """

    id = "PIN-2"
    name = "pinned copies measured no faster"
    decision = "pin_memory"
    key = "pin_memory"
    source = "measured: host-to-device GB/s pinned vs pageable"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        h2d = ctx.trial.host_to_device if ctx.trial is not None else None
        if h2d is None or h2d.pinned_gb_s >= PINNED_GAIN * h2d.pageable_gb_s:
            return None
        return self.finding(
            False,
            f"Measured: pinned {h2d.pinned_gb_s:.1f} GB/s vs pageable {h2d.pageable_gb_s:.1f} "
            "GB/s; pinning gains less than 10% here and locks memory.",
            evidence={"pinned_gb_s": h2d.pinned_gb_s, "pageable_gb_s": h2d.pageable_gb_s},
            measured=True,
            confidence="high",
        )


class LowRamNoPin(Rule):
    """Symptom: after the workers, little RAM is left.

    Recommendation: pin_memory False.
    Why: [IO] pinned memory is more likely to run out of memory than pageable memory.
    """

    id = "PIN-3"
    name = "RAM too tight for pinned memory"
    decision = "pin_memory"
    key = "pin_memory"
    source = "[IO] 2. pinned memory is more likely to run out of memory"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        ram = ctx.ram_per_rank
        if ram is None:
            return None
        w = state.get("num_workers", 0)
        in_flight = max(w, 1) * (state.get("prefetch_factor") or 2) * ctx.batch_bytes
        left = ram - w * ctx.worker_rss_bytes - 2 * in_flight
        if left >= 0.1 * ram:
            return None
        return self.finding(
            False,
            f"Only {_gb(max(left, 0))} of {_gb(ram)} per rank is left after {w} workers and the "
            "batches in flight; pinned (page-locked) buffers could run the machine out of memory.",
            evidence={"ram_per_rank_bytes": ram, "left_bytes": round(left)},
        )


class PinForGpu(Rule):
    """Symptom: a GPU is present (probed or planned) and RAM allows.

    Recommendation: pin_memory True.
    Why: [IO] page-locked host memory avoids a staging copy on host-to-device transfers; measured
    speed-up when the trial timed it.
    """

    id = "PIN-4"
    name = "pin memory for the GPU"
    decision = "pin_memory"
    key = "pin_memory"
    source = "[IO] 2. pinned memory speeds host-to-device copies; measured H2D when available"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if not ctx.has_gpu:
            return None
        h2d = ctx.trial.host_to_device if ctx.trial is not None else None
        gpu = ctx.hardware.gpus[0]
        evidence: dict[str, Any] = {"gpu": gpu.name, "planned": ctx.hardware.planned}
        if h2d is not None:
            evidence.update(pinned_gb_s=h2d.pinned_gb_s, pageable_gb_s=h2d.pageable_gb_s)
            why = f"measured {h2d.pinned_gb_s / max(h2d.pageable_gb_s, 1e-9):.1f}x faster copies"
        else:
            why = "pinned buffers skip the staging copy on every host-to-device transfer"
        return self.finding(
            True,
            f"GPU {gpu.name}: {why}.",
            evidence=evidence,
            measured=h2d is not None,
            confidence="high" if h2d is not None else "medium",
        )


# ---------------------------------------------------------------------------------------------
# Shards and prefixes


def _readers(ctx: Context, state: Mapping[str, Any]) -> int:
    return ctx.ranks * max(state.get("num_workers", 0), 1)


class FewShardsPerReader(Rule):
    """Symptom: at ~150 MB per shard the set would give some readers fewer than 4 shards.

    Recommendation: smaller shards, total / (ranks x workers x 4), never under 1 MB.
    Why: [IO] sharded distribution (each reader reads M/N objects) and 1-128 MB files; [SRC]
    shuffle by reordering shards needs several shards per reader.
    """

    id = "SHARD-1"
    name = "enough shards for every reader"
    decision = "shard_size"
    key = "shard_size_bytes"
    source = "[IO] 2. ShardedByS3Key M/N, 1-128 MB files; [SRC] 3. shuffle by reordering shards"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        readers = _readers(ctx, state)
        if ctx.total_bytes / SHARD_TARGET_BYTES >= readers * SHARDS_PER_READER:
            return None
        size = max(int(ctx.total_bytes / (readers * SHARDS_PER_READER)), SHARD_FLOOR_BYTES)
        return self.finding(
            size,
            f"{readers} readers ({ctx.ranks} rank(s) x workers) need at least "
            f"{SHARDS_PER_READER} shards each: {_gb(ctx.total_bytes)} gives {_gb(size)} shards.",
            evidence={"total_bytes": ctx.total_bytes, "readers": readers},
        )


class PackSmallObjects(Rule):
    """Symptom: objects are under 50 MB.

    Recommendation: ~150 MB shards (WebDataset tar / TFRecord / RecordIO).
    Why: [SRC] ~150 MB containers; [CPP] 50-200 MB shards parallelize within a file without hitting
    per-object limits.
    """

    id = "SHARD-2"
    name = "pack small objects into ~150 MB shards"
    decision = "shard_size"
    key = "shard_size_bytes"
    source = "[SRC] 3. ~150 MB containers; [CPP] 1. shard size 50-200 MB"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.p50_bytes >= SHARD_MIN_BYTES:
            return None
        return self.finding(
            SHARD_TARGET_BYTES,
            f"Median object {_gb(ctx.p50_bytes)} is under 50 MB: packing into ~150 MB shards "
            "cuts the GET count and hides first-byte latency.",
            evidence={"p50_object_bytes": ctx.p50_bytes},
        )


class SplitHugeObjects(Rule):
    """Symptom: objects over 200 MB.

    Recommendation: split into ~150 MB shards (or read with ranged GETs).
    Why: [IO] very large files cannot be parallelized without ranged GETs; [CPP] 50-200 MB.
    """

    id = "SHARD-3"
    name = "split objects over 200 MB"
    decision = "shard_size"
    key = "shard_size_bytes"
    source = "[IO] 2. very large files need ranged GETs; [CPP] 1. shard size 50-200 MB"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.p50_bytes <= SHARD_MAX_BYTES:
            return None
        return self.finding(
            SHARD_TARGET_BYTES,
            f"Median object {_gb(ctx.p50_bytes)} is over 200 MB: one reader cannot parallelize "
            "within it; split into ~150 MB shards or read with ranged GETs.",
            evidence={"p50_object_bytes": ctx.p50_bytes},
        )


class SpreadPrefixes(Rule):
    """Symptom: many ranks, or a high GET rate, on one S3 prefix.

    Recommendation: spread the shards over several prefixes (or buckets).
    Why: [CPP] shard across buckets and prefixes to avoid throttling when many nodes hit one prefix;
    the expected GET rate per prefix.
    """

    id = "PFX-1"
    name = "spread shards over prefixes"
    decision = "prefix_layout"
    key = "prefix_layout"
    source = "[CPP] 1. shard across buckets and prefixes; expected GET/s per prefix"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if ctx.training_source(state) != "stream":
            return None
        _, spo = ctx.layout(state)
        gets_per_s = ctx.ranks * _expected_rate(ctx, state) / spo
        prefixes = max(ctx.profile.distinct_prefixes, 1)
        by_rate = math.ceil(gets_per_s / PREFIX_GET_RATE)
        many_ranks = ctx.ranks >= MANY_RANKS and prefixes < 2
        if by_rate <= prefixes and not many_ranks:
            return None
        target = max(by_rate, min(ctx.ranks, 16) if many_ranks else 1, 2)
        return self.finding(
            target,
            f"{ctx.ranks} rank(s) issue ~{gets_per_s:,.0f} GET/s over {prefixes} prefix(es): "
            f"spread the shards over at least {target} prefixes to avoid 503 SlowDown.",
            evidence={
                "ranks": ctx.ranks,
                "get_per_s": round(gets_per_s, 1),
                "distinct_prefixes": prefixes,
            },
        )


# ---------------------------------------------------------------------------------------------
# Throughput, input-bound, preprocessing


class MeasuredThroughput(Rule):
    """Symptom: the sweep measured the chosen num_workers.

    Recommendation: expect the measured samples/s.
    Why: measured loader samples/s at the recommended configuration.
    """

    id = "MEAS-1"
    name = "expected throughput measured"
    decision = "throughput"
    key = "expected_samples_per_s"
    source = "measured: trial sweep at the recommended num_workers"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        w = state.get("num_workers", 0)
        rate = ctx.measured_rates(state).get(w)  # none when training reads a copy or new shards
        if rate is None:
            return None
        predicted = ctx.model(state, w).samples_per_s
        return self.finding(
            round(rate, 1),
            f"Measured {rate:,.0f} samples/s with {w} worker(s); the model predicts "
            f"{predicted:,.0f}.",
            evidence={
                "measured_samples_per_s": rate,
                "predicted_samples_per_s": predicted,
                "sweep_samples_per_s": _model_vs_measured(ctx, state),
            },
            measured=True,
            confidence="high",
        )


def _model_vs_measured(ctx: Context, state: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per measured num_workers: the measured samples/s and the model's prediction."""
    return {
        str(w): {"measured": round(r, 1), "predicted": round(ctx.model(state, w).samples_per_s, 1)}
        for w, r in sorted(ctx.measured_rates().items())
    }


class ModelThroughput(Rule):
    """Symptom: no measurement at the chosen configuration.

    Recommendation: expect the model's samples/s.
    Why: the throughput model (advisor/model.py).
    """

    id = "MEAS-2"
    name = "expected throughput predicted"
    decision = "throughput"
    key = "expected_samples_per_s"
    source = "model: advisor/model.py"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        w = state.get("num_workers", 0)
        p = ctx.model(state, w)
        storage = ctx.storage_for(ctx.training_source(state))
        return self.finding(
            round(p.samples_per_s, 1),
            f"Predicted {p.samples_per_s:,.0f} samples/s with {w} worker(s), bound by "
            f"{p.bottleneck} ({storage.name} storage).",
            evidence={
                "predicted_samples_per_s": p.samples_per_s,
                "bottleneck": p.bottleneck,
                "storage": storage.name,
                # what the trial measured where the data lives now (e.g. before a local copy)
                "sweep_samples_per_s": _model_vs_measured(ctx, {**state, "data_source": "stream"})
                if ctx.measured_rates()
                else None,
            },
            confidence="medium" if storage.measured or ctx.cpu_measured else "low",
        )


class InputBound(Rule):
    """Symptom: the loader delivers less than the GPU consumes.

    Recommendation: the job will be input-bound; see the idle-GPU cost and the fixes.
    Why: expected samples/s vs the workload's consumer rate.
    """

    id = "MEAS-3"
    name = "input-bound"
    decision = "throughput"
    key = "input_bound"
    source = "measured/predicted samples/s vs consumer rate"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        rate, consumer = state.get("expected_samples_per_s"), ctx.consumer_rate
        if rate is None or consumer is None or rate >= consumer:
            return None
        return self.finding(
            True,
            f"The loader delivers {rate:,.0f} of the {consumer:,.0f} samples/s the GPU consumes: "
            f"the GPU waits {1 - rate / consumer:.0%} of the time.",
            evidence={"expected_samples_per_s": rate, "consumer_rate_samples_per_s": consumer},
        )


class CpuBoundDecode(Rule):
    """Symptom: input-bound and the CPU (decode/transform) is the limit.

    Recommendation: do deterministic work (decode, resize) once offline; keep only random
    augmentation online; or more cores per GPU.
    Why: [IO] make __getitem__ cheap: that alone took 1 worker to the speed of 7.
    """

    id = "MEAS-4"
    name = "decode is the bottleneck"
    decision = "preprocess"
    key = "MEAS-4"
    source = "[IO] 2. make __getitem__ cheap; low GPU with high CPU -> preprocess offline"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if not state.get("input_bound"):
            return None
        p = ctx.model(state, state.get("num_workers", 0))
        if p.bottleneck != "cpu":
            return None
        return self.finding(
            "preprocess-offline",
            f"{ctx.cpu_s_per_sample * 1e3:,.2f} ms of CPU per sample on "
            f"{max(ctx.cores_per_rank - 1, 1)} core(s) caps the loader at "
            f"{min(p.cpu_bound, p.latency_bound):,.0f} "
            "samples/s: move deterministic decode/resize offline, keep random augmentation.",
            evidence={
                "cpu_s_per_sample": ctx.cpu_s_per_sample,
                "cpu_bound_samples_per_s": min(p.cpu_bound, p.latency_bound),
            },
            measured=ctx.cpu_measured,
        )


# ---------------------------------------------------------------------------------------------
# Cost notes


class GetRequestCost(Rule):
    """Symptom: training reads S3 objects.

    Recommendation: know the GET count and price per epoch.
    Why: [SRC] 1 M GET requests ~$0.40.
    """

    id = "COST-1"
    name = "GET requests per epoch"
    decision = "cost"
    key = "COST-1"
    source = "[SRC] 3. costs: 1 M GET requests ~$0.40"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if not ctx.in_s3:
            return None
        source = ctx.training_source(state)
        object_bytes, _ = ctx.layout(state)
        objects = ctx.total_bytes / max(object_bytes, 1.0)
        epochs = ctx.workload.epochs
        reads = 1 if source != "stream" or state.get("cache_locally") else epochs
        gets = objects * reads
        text = f"~{objects:,.0f} GETs per pass, {reads} pass(es) from S3"
        if state.get("data_source") == "reshard-first":
            gets += ctx.profile.object_count  # packing reads every small object once
            text += f", plus {ctx.profile.object_count:,} GETs to pack the shards once"
        price = gets / 1e6 * GET_PRICE_PER_MILLION
        return self.finding(
            round(price, 2),
            f"{text}: ~${price:,.2f} in requests.",
            evidence={"get_requests": round(gets), "usd": round(price, 2)},
        )


class StartupTime(Rule):
    """Symptom: the job waits for a copy (File mode) or a listing (FastFile) before training.

    Recommendation: know the start-up delay.
    Why: [SRC] File mode ~200 MB/s; FastFile lists ~5,500 objects/s.
    """

    id = "COST-2"
    name = "start-up delay"
    decision = "cost"
    key = "COST-2"
    source = "[SRC] 3. File mode ~200 MB/s; FastFile lists ~5,500 objects/s"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if not ctx.in_s3:
            return None
        source = ctx.training_source(state)
        object_bytes, _ = ctx.layout(state)
        objects = ctx.total_bytes / max(object_bytes, 1.0)
        if source == "copy-local":
            seconds = ctx.total_bytes / (FILE_MODE_MB_S * MB)
            what = f"copying {_gb(ctx.total_bytes)} at ~200 MB/s"
        elif source == "stream":
            seconds = objects / FASTFILE_LIST_OBJECTS_S
            what = f"listing {objects:,.0f} objects at ~5,500/s"
        else:
            return None
        return self.finding(
            round(seconds, 1),
            f"Start-up: {what} takes ~{seconds / 60:,.1f} min before the first batch.",
            evidence={"startup_s": round(seconds, 1)},
        )


class IdleGpuCost(Rule):
    """Symptom: input-bound.

    Recommendation: know the idle GPU time per epoch (it is billed).
    Why: [SRC] the instance's billable seconds dominate the cost; expected vs consumer rate.
    """

    id = "COST-3"
    name = "idle GPU time per epoch"
    decision = "cost"
    key = "COST-3"
    source = "[SRC] 3. instance billable seconds dominate; expected vs consumer samples/s"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        rate, consumer = state.get("expected_samples_per_s"), ctx.consumer_rate
        if not state.get("input_bound") or not rate or consumer is None:
            return None
        samples = ctx.samples_per_rank
        idle = samples / rate - samples / consumer
        return self.finding(
            round(idle, 1),
            f"Each epoch the GPUs idle ~{idle / 60:,.1f} min waiting for data "
            f"({samples:,.0f} samples per rank).",
            evidence={"idle_s_per_epoch": round(idle, 1), "samples_per_rank": round(samples)},
        )


class SharedFsStorageCost(Rule):
    """Symptom: the data source is a shared file system (FSx for Lustre) the job will create.

    Recommendation: know its monthly price next to S3's.
    Why: [SRC] FSx Scratch 2 ~$140/TB-month (min 1.2 TB) vs S3 ~$23/TB-month; indexing ~2 million
    objects takes about an hour.
    """

    id = "COST-4"
    name = "shared file system storage cost"
    decision = "cost"
    key = "COST-4"
    source = "[SRC] 3. FSx Scratch 2 ~$140/TB-month, min 1.2 TB; S3 ~$23/TB-month"

    def evaluate(self, ctx: Context, state: Mapping[str, Any]) -> Finding | None:
        if state.get("data_source") != "shared-fs" or ctx.on_fsx:
            return None
        tb = ctx.total_bytes / TB
        fsx = max(tb, FSX_MIN_TB) * FSX_USD_PER_TB_MONTH
        s3 = tb * S3_USD_PER_TB_MONTH
        index_h = ctx.profile.object_count / FSX_INDEX_OBJECTS_PER_HOUR
        return self.finding(
            round(fsx, 2),
            f"FSx for Lustre for {tb:,.1f} TB: ~${fsx:,.0f}/month (S3 alone ~${s3:,.0f}); "
            f"linking the bucket indexes {ctx.profile.object_count:,} objects in "
            f"~{index_h:,.1f} h.",
            evidence={"fsx_usd_month": round(fsx, 2), "s3_usd_month": round(s3, 2)},
        )


RULES: tuple[Rule, ...] = (
    DataAlreadyOnSharedFs(),
    DataAlreadyLocal(),
    VeryLargeSharedSet(),
    ManySmallFiles(),
    SmallSetCopyLocal(),
    StreamFromS3(),
    AfterReshard(),
    EfsThroughput(),
    CacheAfterFirstEpoch(),
    ReaderRequestsInFlight(),
    ReaderBytesInFlight(),
    WorkersCappedByCores(),
    WorkersCappedByRam(),
    WorkersFromSweep(),
    WorkersFromModel(),
    NoPrefetchWithoutWorkers(),
    PrefetchHidesLatency(),
    SharedMemoryTooSmall(),
    NoGpuNoPin(),
    PinnedNotFaster(),
    LowRamNoPin(),
    PinForGpu(),
    FewShardsPerReader(),
    PackSmallObjects(),
    SplitHugeObjects(),
    SpreadPrefixes(),
    MeasuredThroughput(),
    ModelThroughput(),
    InputBound(),
    CpuBoundDecode(),
    GetRequestCost(),
    StartupTime(),
    IdleGpuCost(),
    SharedFsStorageCost(),
)


def rule_by_id(rule_id: str) -> Rule:
    for rule in RULES:
        if rule.id == rule_id:
            return rule
    raise KeyError(rule_id)

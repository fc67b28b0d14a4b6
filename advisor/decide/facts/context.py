"""The facts every rule may read: the inputs, and quantities measured or derived from them.

No rule reasoning lives here: caps, choices and their conditions belong to the rule families.
`state` (the values earlier rules set) enters only where a fact depends on it: where the
training reads (after a reshard, from a copy) and so what the model and the trial say about it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

from advisor.core.model import MeasuredCosts, Prediction, predict
from advisor.core.storage import (
    EFS_DEFAULTS,
    HDD_DEFAULTS,
    LOCAL_NVME_DEFAULTS,
    LOCAL_SSD_DEFAULTS,
    S3_DEFAULTS,
    SHARED_FS_DEFAULTS,
    StorageParams,
)
from advisor.core.workload import Workload
from advisor.decide.facts.copy_rate import CopyRate, copy_rate
from advisor.decide.facts.costs import trial_costs
from advisor.decide.facts.evidence import SweepEvidence
from advisor.decide.facts.reading import TrainingReads
from advisor.decide.keys import Key, State
from advisor.decide.thresholds import (
    DEFAULT_CPU_S,
    DEFAULT_CPU_S_PER_SAMPLE,
    DEFAULT_WORKER_RSS_BYTES,
    SHARD_TARGET_BYTES,
)
from advisor.measure.hardware import HardwareProfile
from advisor.measure.profile import DatasetProfile
from advisor.measure.trial.probe_results import StorageProbe
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_LOCAL_COPY,
    READ_PACKED,
    CountRate,
    TrialResult,
)
from native_loader.local_copy import CopyReport


@dataclass(frozen=True)
class Context:
    """The facts every rule may read: the inputs, where training reads (`reads`), and the
    quantities derived from them."""

    profile: DatasetProfile
    hardware: HardwareProfile
    workload: Workload
    trial: TrialResult | None = None
    data_fs: str | None = None  # file system type of a local data path ("nfs4", "ext4", ...)
    # the last sync of this set's local copy, as its prepare() ran (None: none ran)
    local_copy: CopyReport | None = None

    @cached_property
    def reads(self) -> TrainingReads:
        """Where the data is, what training reads of it, and whether the trial read the same."""
        return TrainingReads(self.profile, self.hardware, self.workload, self.trial, self.data_fs)

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
        decode = self.trial.decode if self.trial is not None else None
        if decode is not None:
            per_sample = decode.output_bytes_per_sample or decode.bytes_per_sample
        return per_sample * self.workload.batch_size

    @property
    def cpu_s_per_sample(self) -> float:
        if self.trial is not None and self.trial.decode is not None:
            return self.trial.decode.cpu_s_per_sample / self.core_speed
        return DEFAULT_CPU_S_PER_SAMPLE.get(self.profile.dominant_format, DEFAULT_CPU_S)

    @property
    def core_speed(self) -> float:
        """A target core's speed over one of this machine's (1: this machine, or a target
        core taken as fast): CPU seconds measured here take this much less there."""
        target = self.hardware.target
        return target.core_speed if target is not None else 1.0

    @property
    def cpu_measured(self) -> bool:
        return self.trial is not None and self.trial.decode is not None

    # --- the machine --------------------------------------------------------------------------

    @property
    def cores_per_rank(self) -> float:
        """The node's usable cores shared by its ranks: a fraction where a quota is one, or
        where more ranks than cores share the node (each rank's training thread and workers
        then share its cores)."""
        return self.hardware.usable_cores / self.ranks_per_node

    @property
    def worker_slots(self) -> int:
        """The most workers the cores per rank can run at once: every core, a part-core
        included (1.5 cores run 2 workers, which share them)."""
        return math.ceil(self.cores_per_rank - 1e-9)

    @property
    def worker_rss_bytes(self) -> float:
        if self.trial is not None and self.trial.sweep:
            peak = max(p.peak_worker_rss_bytes for p in self.trial.sweep)
            if peak > 0:
                return peak
        return DEFAULT_WORKER_RSS_BYTES

    @property
    def ram_per_rank(self) -> float | None:
        avail = self.hardware.ram_available_bytes
        return None if avail is None else avail / self.ranks_per_node

    @property
    def fits_local_disk(self) -> bool:
        disk = self.hardware.disk
        return disk is not None and disk.free_bytes >= 1.1 * self.total_bytes

    @property
    def target_disk(self) -> bool:
        """True when the plan's local disk is the target's own (its local NVMe), not this
        machine's that the trial copied to."""
        target = self.hardware.target
        return target is not None and target.local_disk_bytes is not None

    def local_storage(self) -> StorageParams:
        """The local disk's storage where no trial measured it: its kind's defaults, and on a
        target whose local disk is several NVMe devices striped, each device's bandwidth."""
        kind = self.hardware.disk.kind if self.hardware.disk else "unknown"
        storage = {"nvme": LOCAL_NVME_DEFAULTS, "hdd": HDD_DEFAULTS}.get(kind, LOCAL_SSD_DEFAULTS)
        target = self.hardware.target
        if self.target_disk and target is not None and storage.aggregate_mb_s is not None:
            aggregate = storage.aggregate_mb_s * target.local_disks
            storage = dataclasses.replace(storage, aggregate_mb_s=aggregate)
        return storage

    def measured_storage(self) -> StorageParams | None:
        """The listed objects' storage as the trial's probe measured it (files where the data
        is a local path: the reader's local read-ahead reads them)."""
        probe = self.trial.storage if self.trial is not None else None
        if probe is None or probe.per_connection_mb_s <= 0:
            return None
        return probe.params(S3_DEFAULTS.requests_in_flight, local=self.profile.storage == "local")

    def copy_rate(self) -> CopyRate:
        """How fast a copy of the set to local disk runs (`copy_rate`: one figure for one
        copy, the most direct measurement there is)."""
        return copy_rate(self.local_copy, self.trial)

    def copy_seconds(self) -> float:
        """The copy of the whole set at `copy_rate`: what every node spends before its first
        batch (a plan's nodes each make one)."""
        return self.total_bytes / self.copy_rate().bytes_per_s

    def copy_storage(self) -> StorageParams | None:
        """The local copy's storage as the trial's probe of its copy measured it (None: the
        trial made no copy). Not the S3 probe's: the copy is read from local disk."""
        probe = self.trial.copy_storage if self.trial is not None else None
        if probe is None or probe.per_connection_mb_s <= 0:
            return None
        return probe.params(S3_DEFAULTS.requests_in_flight, local=True)

    def read_storage(self, state: State) -> StorageParams:
        """What one rank reads from in the steady state (`reads.path`): a local copy (a
        copy-local from S3, or the cache later epochs read) or local packed shards read local
        files, whatever the first epoch streamed from."""
        if self.reads.path(state) in (READ_LOCAL_COPY, READ_PACKED):
            return self.storage_for("copy-local")
        return self.storage_for(self.training_source(state))

    def read_probe(self, state: State) -> StorageProbe | None:
        """The trial's probe behind `read_storage` (None: no trial, or defaults)."""
        if self.trial is None or not self.read_storage(state).measured:
            return None
        local_copy = self.reads.path(state) in (READ_LOCAL_COPY, READ_PACKED)
        if local_copy and self.profile.storage != "local":
            return self.trial.copy_storage
        return self.trial.storage

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
        if source == "copy-local":  # a local folder read in place, or a copy of the S3 set
            local = self.profile.storage == "local"
            measured = self.measured_storage() if local else self.copy_storage()
            if self.target_disk:  # the target's NVMe, not the disk the trial copied to
                measured = None
            return measured or self.local_storage()
        if source == "shared-fs":
            measured = self.measured_storage() if self.reads.on_fsx else None
            return self._over_node_network(measured or SHARED_FS_DEFAULTS)
        if source == "efs":
            return self._over_node_network(self.measured_storage() or EFS_DEFAULTS)
        return self._over_node_network(self.measured_storage() or S3_DEFAULTS)

    def _over_node_network(self, storage: StorageParams) -> StorageParams:
        """Storage read over the network, on the target node: its network's bandwidth is the
        node's ceiling (the storage scales out behind it); without a figure, the ceiling this
        machine measured or assumed stays."""
        target = self.hardware.target
        if target is None or target.network_gbps is None:
            return storage
        return dataclasses.replace(storage, aggregate_mb_s=target.network_gbps * 1000 / 8)

    def layout(self, state: State) -> tuple[float, float]:
        """(object bytes, samples per object) the training reads: after resharding if planned."""
        if state.get(Key.DATA_SOURCE) == "reshard-first":
            shard = float(state.get(Key.SHARD_SIZE_BYTES) or SHARD_TARGET_BYTES)
            return shard, max(shard / max(self.stored_bytes_per_sample, 1.0), 1.0)
        return self.object_bytes, self.samples_per_object

    def streamed(self, state: State) -> bool:
        """True when the loader streams the objects it reads (tar shards as samples, text shards
        as records; the reshard writes tar shards): a worker holds its reader's read-ahead of
        them, never a whole one."""
        if state.get(Key.DATA_SOURCE) == "reshard-first":
            return True
        return self.profile.dominant_format == "tar" or self.profile.record_format is not None

    def objects_read(self, state: State) -> float:
        """Objects one pass over the set reads, in the layout the training reads."""
        object_bytes, _ = self.layout(state)
        return self.total_bytes / max(object_bytes, 1.0)

    def training_source(self, state: State) -> str | None:
        source = state.get(Key.DATA_SOURCE)
        return state.get(Key.AFTER_RESHARD, "stream") if source == "reshard-first" else source

    def model_rates(
        self, state: State, workers: range, cores: float | None = None
    ) -> dict[int, float]:
        return {w: self.model(state, w, cores).samples_per_s for w in workers}

    def model(
        self, state: State, num_workers: int, cores: float | None = None, *, blocking: bool = False
    ) -> Prediction:
        """The model's Prediction for `num_workers` (cores per rank unless `cores` is given), for
        a consumer's step that holds its core (a CUDA sync that spins: the slower), or with
        `blocking` one that leaves it to the loading (a step waiting on an event)."""
        object_bytes, spo = self.layout(state)
        costs = self.costs(state, num_workers)
        if blocking:
            costs = dataclasses.replace(costs, step_cpu_share=0.0)
        storage = self.read_storage(state)
        if storage.requests_in_flight > 1 and Key.REQUESTS_IN_FLIGHT in state:
            storage = dataclasses.replace(
                storage, requests_in_flight=int(state[Key.REQUESTS_IN_FLIGHT])
            )
        return predict(
            num_workers,
            object_bytes=object_bytes,
            samples_per_object=spo,
            cpu_s_per_sample=self.cpu_s_per_sample,
            usable_cores=self.cores_per_rank if cores is None else cores,
            storage=storage,
            consumer_rate=self.consumer_rate,
            epoch_objects=math.ceil(self.objects_read(state) / max(self.ranks, 1)),
            costs=costs,
        )

    def costs(self, state: State, num_workers: int) -> MeasuredCosts:
        """What the trial measured of the loading with `num_workers`, for the model, on the
        target's cores (`trial_costs`)."""
        return trial_costs(
            self.trial,
            num_workers,
            as_trialled=self.reads.as_trialled(state),
            packed_cpu=self.reads.packed_cpu_measured(state),
            listed=self.reads.path(state) == READ_LISTED,
            core_speed=self.core_speed,
        )

    def measured_prefetch(self, state: State, num_workers: int) -> int | None:
        """The prefetch_factor the sweep measured `num_workers` with, where its rates hold."""
        if num_workers not in self.measured_counts(state):
            return None
        assert self.trial is not None
        return next(
            (p.prefetch_factor for p in self.trial.sweep if p.num_workers == num_workers), None
        )

    def training_share(self, state: State, num_workers: int) -> float:
        """The share of a core the training thread keeps while `num_workers` workers load, at
        the rate the model predicts for the loop: a spinning step's duty cycle (the rate over
        the consumer's) and taking the workers' batches (the sweep's measured CPU per sample,
        else the model's hand-over) x the rate (`Prediction.training_share`)."""
        return self.model(state, num_workers).training_share

    @cached_property
    def sweep(self) -> SweepEvidence:
        return SweepEvidence.of(self.trial)

    def measured_rates(self, state: State | None = None) -> dict[int, float]:
        """Median samples/s per num_workers as training saw them in the trial (the slower step
        model's; see `measured_counts`)."""
        return {w: c.median for w, c in self.measured_counts(state).items()}

    def measured_counts(self, state: State | None = None) -> dict[int, CountRate]:
        """Per num_workers, what the trial's training-loop measurement saw (`CountRate`), lower
        bounds only where they count (`SweepEvidence`).

        With `state`, only when the training reads what the trial read, on this machine (else
        empty: a planned target machine, `--target-gpu`, is the model's to predict).
        """
        if state is not None and (self.hardware.planned or not self.reads.as_trialled(state)):
            return {}
        return dict(self.sweep.kept)

    def lower_bounds_left_out(self) -> dict[int, float]:
        """num_workers whose measurement was a lower bound below the steady counts."""
        return dict(self.sweep.lower_bounds_left_out)

    def predicted_rate(self, state: State, num_workers: int, *, blocking: bool = False) -> float:
        """Samples/s training sees at `num_workers`, as the model predicts it: the loader's rate
        through the consumer's step (taking each batch and stepping take turns; a spinning step
        holds its core), as the trial measures it in a training loop; the loader's own rate
        where no consumer rate was given. The one predicted figure every rule reports; with
        `blocking`, what a step that leaves its core to the loading sees."""
        return self.model(state, num_workers, blocking=blocking).trained_samples_per_s

    def expected_rate(self, state: State) -> float:
        """Samples/s at the chosen num_workers: measured where the trial read it, else modelled."""
        w = state.get(Key.NUM_WORKERS, 0)
        return self.measured_rates(state).get(w) or self.predicted_rate(state, w)

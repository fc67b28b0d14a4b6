"""What a trial measured, as plain data (no torch): the training-loop measurement's slices and
per-count rates, and `TrialResult`, which holds them with the probes' records
(`probe_results.py`). The rules read these types at run time.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from advisor.core.workload import Workload
from advisor.measure.hardware.gpu_decode import GpuDecode
from advisor.measure.trial.probe_results import (
    DecodeCost,
    HandoverCost,
    HostToDevice,
    SampleCopy,
    StorageProbe,
)

STEP_NONE, STEP_SLEEP, STEP_SPIN = "none", "sleep", "spin"
# the step models in plain words: a step that blocks (waits on the GPU asleep), one that keeps a
# core spinning (CUDA's default wait), none (no consumer rate: the loader flat out)
STEP_WORDS = {STEP_NONE: "no step", STEP_SLEEP: "a blocking step", STEP_SPIN: "a spinning step"}
# What the trial's loaders read: the objects where the profile listed them, a local copy of a
# sample (what training reads after a copy-local, and what a local cache serves later epochs),
# or a sample packed into tar shards on local disk (after a reshard-first: `trial/packed.py`).
READ_LISTED, READ_LOCAL_COPY, READ_PACKED = "listed", "local-copy", "packed"
# Each read path in a few words, for progress, labels and notes.
READ_PATH_WORDS = {
    READ_LISTED: "the listed objects",
    READ_LOCAL_COPY: "a local copy",
    READ_PACKED: "a packed sample",
}


@dataclass(frozen=True)
class LoaderPoint:
    """One slice of the training-loop measurement: one num_workers, one step mode."""

    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    samples: int
    seconds: float
    samples_per_s: float
    mb_per_s: float
    time_to_first_batch_s: float  # from the slice's start (a fresh loader's: its start-up)
    # the largest resident set in bytes of one of this count's workers at the slice's readings
    # of the tree, at most every 0.25 s (`TreeMeter.peak_child_rss_bytes`; the other counts'
    # loaders, open between their slices, left out); 0 with no workers
    peak_worker_rss_bytes: int
    # CPU seconds the main (training) thread spent per sample on loading, over the window's
    # counted rounds (also where they were too few for a steady rate, `steady` False: a cost
    # per sample needs no long window): with 0 workers all of the loader's Python work, with
    # workers receiving the batches; a spinning step's spin left out (it is no loading). None:
    # not measured (the slice counted no round).
    main_cpu_s_per_sample: float | None = None
    # Busy CPU seconds per sample of the cores this process may use, over the same rounds (all
    # processes': the loader's, its readers', a local storage server's), the spin left out;
    # under a CPU quota its group's own, with a loopback endpoint's server added. None: not
    # measured.
    machine_cpu_s_per_sample: float | None = None
    # False: the slice ended before a steady window held enough batches, so the rate counts
    # start-up (or the batches that waited) too and is only a lower bound.
    steady: bool = True
    step: str = STEP_NONE  # how the consumer's step cost the host in this slice
    # The training thread's share of a core over the same rounds, its step's spin included:
    # what the model's `Prediction.training_share` predicts. None: not measured.
    training_share: float | None = None
    # The DataLoader workers' own CPU seconds per sample (all their threads: reading, decoding,
    # handing batches over), over the same rounds; each sample is loaded in one worker.
    # None: not measured (0 workers, or no round counted).
    worker_cpu_s_per_sample: float | None = None
    # Under a CPU quota, the CPU seconds per sample of the processes serving a loopback
    # endpoint outside the quota's group (`local_server.ServingScan`), already in
    # `machine_cpu_s_per_sample`. None: none such (no quota, or a remote endpoint).
    server_cpu_s_per_sample: float | None = None
    # The seconds a loader process waited for an epoch's first item beyond its own CPU, the
    # mean over the epochs its processes started in the same rounds (`EpochStarts`): what each
    # epoch of a set this small pays before anything arrives. None: no epoch started there.
    epoch_start_wait_s: float | None = None


@dataclass(frozen=True)
class StepRate:
    """One count under one step model: the median of its slices (the steady ones, or all of
    them where none was steady: a lower bound) and their range."""

    step: str
    median: float
    low: float
    high: float
    lower_bound: bool
    slices: int

    @property
    def noise(self) -> float:
        """Half the range: how far a slice strays from the median."""
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class CountRate:
    """What training saw from one num_workers over its slices, per step model (`steps`).

    `median`, `low`-`high` and `lower_bound` are those of its slower step model: what the
    tables show as the count's figure.
    """

    num_workers: int
    steps: tuple[StepRate, ...]

    @property
    def slower(self) -> StepRate:
        return min(self.steps, key=lambda s: s.median)

    @property
    def median(self) -> float:
        return self.slower.median

    @property
    def low(self) -> float:
        return self.slower.low

    @property
    def high(self) -> float:
        return self.slower.high

    @property
    def lower_bound(self) -> bool:
        return self.slower.lower_bound

    @property
    def step(self) -> str:
        return self.slower.step

    @property
    def slices(self) -> int:
        return sum(s.slices for s in self.steps)

    def at(self, step: str) -> StepRate | None:
        return next((s for s in self.steps if s.step == step), None)


def summarise(points: Sequence[LoaderPoint]) -> tuple[CountRate, ...]:
    """One CountRate per num_workers measured in `points`, a StepRate per step model."""
    rates: list[CountRate] = []
    for workers in sorted({p.num_workers for p in points}):
        mine = [p for p in points if p.num_workers == workers and p.samples_per_s > 0]
        steps = []
        for step in dict.fromkeys(p.step for p in mine):
            slices = [p for p in mine if p.step == step]
            kept = [p.samples_per_s for p in slices if p.steady]
            bound = not kept
            kept = kept or [p.samples_per_s for p in slices]
            steps.append(StepRate(
                step, statistics.median(kept), min(kept), max(kept), bound, len(slices)
            ))  # fmt: skip
        if steps:
            rates.append(CountRate(workers, tuple(steps)))
    return tuple(rates)


SETUP_FIELDS = ("batch_size", "consumer_rate", "gpus_per_node", "transform", "usable_cores")
# what the machine the sweep ran on shaped: the counts it swept; the per-sample costs it measured
# hold on another machine (a planned target), where the model carries them
MACHINE_FIELDS = ("gpus_per_node", "usable_cores")


@dataclass(frozen=True)
class TrialSetup:
    """What shaped the training-loop measurement: the workload fields the sweep ran with, the
    cores it swept up to, and what its loaders read (`read_path`). A rule uses the trial's
    measured rates only for a workload and machine with the same setup."""

    batch_size: int
    consumer_rate: float | None
    gpus_per_node: int
    transform: str | None
    usable_cores: float
    read_path: str = READ_LISTED

    @classmethod
    def of(
        cls, workload: Workload, usable_cores: float, read_path: str = READ_LISTED
    ) -> TrialSetup:
        return cls(
            batch_size=workload.batch_size,
            consumer_rate=workload.consumer_rate,
            gpus_per_node=workload.gpus_per_node,
            transform=workload.transform,
            usable_cores=usable_cores,
            read_path=read_path,
        )

    def differences(self, other: TrialSetup, machine: bool = True) -> list[str]:
        """The fields (other than the read path) where `other` differs, as "name: mine -> its";
        with `machine` False, not those of the machine (`MACHINE_FIELDS`: a plan for a target
        machine takes the trial's costs per sample, not its counts)."""
        return [
            f"{name} {getattr(self, name)} -> {getattr(other, name)}"
            for name in SETUP_FIELDS
            if (machine or name not in MACHINE_FIELDS)
            and getattr(self, name) != getattr(other, name)
        ]


@dataclass(frozen=True)
class ReadPathSweep:
    """A training-loop measurement on one read path (`read_path`): the first epoch's, where the
    later epochs read something else (S3, then the local cache)."""

    read_path: str
    sweep: tuple[LoaderPoint, ...] = ()
    counts: tuple[CountRate, ...] = ()

    def best_count(self) -> CountRate | None:
        return max(self.counts, key=lambda c: c.median, default=None)


@dataclass(frozen=True)
class TrialResult:
    """Everything the trial measured; a part is None when the budget ran out or it was cancelled.

    `sweep` and `counts` are the training-loop measurement on the read path `setup.read_path`
    (the steady state: what every epoch, or every epoch after the first, reads); `first_epoch`
    the one on what the first epoch reads, where that differs (S3 before the cache fills)."""

    uri: str
    seconds_budget: float
    seconds_used: float
    storage: StorageProbe | None = None
    decode: DecodeCost | None = None
    sweep: tuple[LoaderPoint, ...] = ()  # every slice of the training-loop measurement
    counts: tuple[CountRate, ...] = ()  # per num_workers: median and spread over its slices
    host_to_device: HostToDevice | None = None
    cancelled: bool = False
    notes: tuple[str, ...] = field(default=())
    requests_in_flight: int | None = None  # per process, as the decode and the sweep read
    inflight_bytes: int | None = None  # the byte budget per process the sweep read with
    setup: TrialSetup | None = None  # None: a result from before setups were recorded
    first_epoch: ReadPathSweep | None = None
    # the storage probe on the local copy of the sample (or its packed shards), where the trial
    # made one (what training reads after a copy-local, or from a cache): its own first byte and
    # bandwidth, not S3's
    copy_storage: StorageProbe | None = None
    # the copy of that sample to local disk, timed (None: the trial made no local copy)
    sample_copy: SampleCopy | None = None
    # the JPEG decode on this machine's GPU (batched nvJPEG), where one was present
    gpu_decode: GpuDecode | None = None
    # the worker counts the sweep could not measure: /dev/shm could not hold their batches in
    # flight (the loader refused them at their first batch; `notes` says why)
    shm_refused: tuple[int, ...] = ()
    # what the transform's samples cost to cross from a worker (None: not measured)
    handover: HandoverCost | None = None

    def best_count(self) -> CountRate | None:
        """The count with the highest median as training saw it (not the luckiest slice)."""
        return max(self.counts, key=lambda c: c.median, default=None)

    def first_batch_s(self, num_workers: int) -> float | None:
        """Seconds from a fresh loader with `num_workers` to its first batch, as the sweep
        measured it: its count's first slice starts the loader (workers forked, first reads,
        the first batch made), later slices reuse it. None: that count was not measured."""
        first = next((p for p in self.sweep if p.num_workers == num_workers), None)
        return None if first is None else first.time_to_first_batch_s

    def main_thread_s(self, num_workers: int) -> float | None:
        """The training thread's CPU seconds per sample that the sweep measured over its steady
        windows (median): with 0 workers all of the loading; with workers, taking their batches
        (unpickling what they send). None: no steady slice of that kind."""
        return self._median_cost(num_workers, "main_cpu_s_per_sample")

    def machine_s(self, num_workers: int) -> float | None:
        """The busy CPU seconds per sample of the cores this process may use, as the sweep
        measured them over its steady windows with this kind of count (0 workers, or workers):
        the loading with everything it costs beside the training thread (the readers' threads,
        the network stack, a storage server on the same machine, the workers' hand-over), a
        spinning step's spin left out (it is no loading). None: not measured."""
        return self._median_cost(num_workers, "machine_cpu_s_per_sample")

    def server_s(self, num_workers: int) -> float | None:
        """Under a CPU quota, the CPU seconds per sample of the processes on this machine that
        serve a loopback endpoint (part of `machine_s`). None: none measured."""
        return self._median_cost(num_workers, "server_cpu_s_per_sample")

    def epoch_start_s(self, num_workers: int) -> float | None:
        """The wait for an epoch's first item that the sweep's loader processes measured with
        this kind of count (`LoaderPoint.epoch_start_wait_s`, the median). None: no epoch
        started in a measured window (a set larger than a slice reads)."""
        return self._median_cost(num_workers, "epoch_start_wait_s")

    def worker_s(self, num_workers: int) -> float | None:
        """A worker's own CPU seconds per sample with `num_workers` (the median over its steady
        slices; else over those with workers). None: 0 workers, or not measured."""
        if num_workers == 0:
            return None
        return self._median_cost(num_workers, "worker_cpu_s_per_sample")

    def measured_share(self, num_workers: int) -> float | None:
        """The training thread's share of a core with exactly `num_workers`, its step's spin
        included: the median over the steady slices with a spinning step where there are any
        (what the model predicts), else over those of the step measured. None: not measured."""
        mine = [
            p for p in self.sweep if p.num_workers == num_workers and p.training_share is not None
        ]
        spinning = [p for p in mine if p.step == STEP_SPIN]
        values = [p.training_share for p in spinning or mine if p.training_share is not None]
        return statistics.median(values) if values else None

    def _median_cost(self, num_workers: int, name: str) -> float | None:
        """The median of `name` over the slices of exactly `num_workers` where it was measured
        there (a count's own CPU: more workers contend for the same cores), else over those of
        its kind (0 workers, or workers)."""
        exact = [
            value
            for p in self.sweep
            if (value := getattr(p, name)) is not None and p.num_workers == num_workers
        ]
        if exact:
            return statistics.median(exact)
        values = [
            value
            for p in self.sweep
            if (value := getattr(p, name)) is not None and (p.num_workers > 0) == (num_workers > 0)
        ]
        return statistics.median(values) if values else None

    def worker_handover_s(self, num_workers: int) -> float | None:
        """CPU seconds per sample a worker spends handing its batches over (collate, pickling,
        the queue), beyond the loading the training process does itself with 0 workers, as
        the sweep's cores estimate it: the busy CPU per sample with `num_workers`, less that
        with 0 workers and less the training thread's receiving (another process's CPU on the
        same cores lands in it too). The hand-over probe (`handover`) measures it directly;
        this is the estimate for a result recorded before it. None: not measured (or 0
        workers)."""
        if num_workers == 0:
            return None
        busy, alone, receive = (
            self.machine_s(num_workers),
            self.machine_s(0),
            self.main_thread_s(num_workers),
        )
        if busy is None or alone is None or receive is None:
            return None
        return max(busy - alone - receive, 0.0)

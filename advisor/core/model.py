"""Throughput model: predicted DataLoader samples/s for a number of workers. Pure functions.

Each loader process (a DataLoader worker, or the main process when num_workers == 0) fetches
objects through the native reader, which keeps ``requests_in_flight`` GETs open per process, and
decodes/transforms every sample on one core. Three ceilings bound the loader:

- latency/connection: each process completes ``requests_in_flight / fetch_s`` objects/s (local
  files: no more at once than the reader's read-ahead threads, `StorageParams.concurrent_reads`),
  where ``fetch_s = first_byte_s + object_bytes / per_connection_bandwidth``, and no more than one
  process hands over (`process_objects_per_s`); with a single request in flight, fetching and
  decoding do not overlap, so the process needs ``fetch_s + cpu_per_object`` per object;
- CPU: the cores left for loading (usable cores less the training thread's share of a core, at
  least one; the main process's one with 0 workers) run ``cores / loading_cpu_per_object``
  objects/s, however many workers share them, where the loading CPU is the transform's and the
  process's Python work; and no more than the usable cores (less the step's spin) over the busy
  CPU the trial measured per sample (the readers' threads, the network stack, a storage server
  on the same machine, the hand-over);
- bandwidth: the storage or NIC delivers at most ``aggregate_mb_s``.

Predicted samples/s = samples_per_object x min(processes x per-process rate, CPU, bandwidth),
over whole epochs where the objects one epoch deals to the rank's loader processes are known
(`epoch_rate`): the datasets deal whole objects in turn, so an epoch lasts as long as the
process dealt the most, and starts with nothing in flight.

What a training loop sees (`Prediction.trained_samples_per_s`) with a consumer taking
``consumer_rate`` samples/s: with workers, loading overlaps the step, but the training thread
takes each batch from them (unpickling, `main_s` per sample, as the trial measured it) and then
steps, so ``min(loader, 1 / (main_s + 1 / consumer))``; with 0 workers, the main thread's share
of the loading (the transform and the per-sample hand-over) and the step take turns while the
reader's thread fetches on, so a sample every ``max(1 / loader, main_s + 1 / consumer)``
seconds. The training thread's share of a core is what it is at that rate: a GPU step that
spin-waits (CUDA's default) holds the core ``1 / consumer`` s per sample, so at a delivered rate R
a share of ``R / consumer``, plus ``R x main_s`` for taking batches; the CPU ceiling leaves the
loaders the rest, and the rate is the one at which the two agree.

The model is monotone: more latency never raises it, and it never exceeds what the cores can
decode; from one worker up, more workers never lower the loader's rate (what training sees with
workers also pays the training thread's share of taking their batches, which 0 workers do not:
on one core a worker reads no faster than the training process itself).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from advisor.core.storage import S3_DEFAULTS, StorageParams
from advisor.core.units import MB

__all__ = [
    "HEADROOM",
    "NOISE_CAP",
    "MeasuredCosts",
    "Prediction",
    "choose_workers",
    "epoch_rate",
    "epoch_start_s",
    "predict",
    "process_objects_per_s",
]

# One loader process hands over at most a few thousand samples/s (Python per-sample overhead and
# the DataLoader's pickling) and about a GB/s (0 workers reading 10 KB and 1 MB objects straight
# from SeaweedFS on the 2-core machine), so no process needs requests in flight for more than this.
PROCESS_OBJECTS_S = 3000.0
PROCESS_MB_S = 1000.0
# A loader must beat the consumer's rate by this much to keep up with it through its noise.
HEADROOM = 1.2
# A median over a count's slices is taken to carry this share of noise at most: rates that
# close are the same rate (the rules' "within the measured noise", the trial's step models and
# goals alike). The quality bar asks a mean of 95% of the best count.
NOISE_CAP = 0.05


@dataclass(frozen=True)
class Prediction:
    """The model's answer for one num_workers, with the three ceilings (samples/s)."""

    num_workers: int
    samples_per_s: float
    latency_bound: float  # processes x per-process rate
    cpu_bound: float  # cores left for loading / CPU per sample
    bandwidth_bound: float  # aggregate bandwidth / bytes per sample
    # "cpu", "bandwidth" or "latency": the ceiling that sets the prediction; "objects" where
    # the epoch's objects, dealt whole to the loader processes, cost more than the noise
    # (`epoch_rate`)
    bottleneck: str
    # what a training loop with the consumer's step sees (see the module docstring); the
    # loader's rate when no consumer rate was given
    trained_samples_per_s: float = 0.0
    # the training thread's share of a core at that rate: a spinning step's duty cycle and, with
    # workers, taking their batches (`predict`)
    training_share: float = 0.0
    # samples/s one loader process reads alone: its reads at once over a read's time, and one
    # core's loading (what `epoch_rate` takes for the process dealt the most)
    process_samples_per_s: float = 0.0


def loading_cores(num_workers: int, usable_cores: float, training_share: float = 1.0) -> float:
    """Cores that decode: the main process alone when num_workers == 0, else the usable cores
    less the training thread's share of a core (`Prediction.training_share`: a spinning step's
    duty cycle and the hand-over at the loop's rate). On one core a step that spins all the
    time leaves a worker nothing: the loop then runs at the serial rate its share allows."""
    if num_workers == 0:
        # one thread, on no more than a fractional quota allows (0: no figure, a core)
        return min(1.0, usable_cores) if usable_cores > 0 else 1.0
    return min(num_workers, max(usable_cores - training_share, 0.0))


@dataclass(frozen=True)
class MeasuredCosts:
    """What a trial or a training loop measured of the loading, for `predict`: CPU seconds per
    sample unless said, each None where not measured (the model's own estimate stands). The
    constructors are the measurers' (`advisor.decide.facts.costs`).

    overhead_s: a loader process's Python work beyond the transform (it bounds one process at
        1 / (overhead + CPU), in place of `process_objects_per_s`'s object ceiling).
    main_s: the training thread's, with this kind of count: with 0 workers all of the loading,
        with workers taking their batches (which takes turns with the step).
    machine_s: the usable cores' busy CPU with this kind of count (the readers' threads, the
        network stack, a storage server here, the hand-over): the loader reads at most the
        cores the step's spin leaves over it.
    handover_s: a worker's handing its batches over, which 0 workers never pay (it copies the
        transform's output into fresh shared memory, faulting each page in: 8 MB tensors on
        the 2-core machine, 8.4 ms a sample, four times their decode).
    worker_s: a worker process's own (its reader's threads, the decode, the hand-over).
    process_s: wall seconds one loader process took per sample in a loop, its reads' waits and
        its loading in turn: in place of the storage's fetch.
    step_cpu_share: the share of the step's time it holds its core (a CPU step or a GPU step
        that spin-waits, CUDA's default: 1; one that blocks: little).
    epoch_start_s: wall seconds from an epoch's start to its first sample (`epoch_start_s`)."""

    overhead_s: float | None = None
    main_s: float | None = None
    machine_s: float | None = None
    handover_s: float | None = None
    worker_s: float | None = None
    process_s: float | None = None
    step_cpu_share: float = 1.0
    epoch_start_s: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.step_cpu_share <= 1:
            raise ValueError(f"step_cpu_share={self.step_cpu_share} must be in [0, 1]")

    def on_cores(self, speed: float) -> MeasuredCosts:
        """The CPU costs on cores `speed` times as fast as the ones they were measured on (the
        wall times stay)."""
        cpu = ("overhead_s", "main_s", "machine_s", "handover_s", "worker_s")
        measured = {name: getattr(self, name) for name in cpu if getattr(self, name) is not None}
        return dataclasses.replace(self, **{name: s / speed for name, s in measured.items()})

    def thread_s(self, num_workers: int, cpu_s_per_sample: float) -> float | None:
        """Seconds per sample of a loader process's one loading thread, from what was measured
        (None: nothing; the transform's CPU and the reader's ceilings stand). The most direct
        measure wins: with 0 workers, the training thread's own (the decode probe's few
        samples, timed apart, can pay allocations, 8 MB tensors' fresh pages, that a steady
        loop reuses, so they are no floor for it); with workers, a worker's own CPU, else the
        decode loop (or the transform) plus the hand-over."""
        loop_s = None if self.overhead_s is None else self.overhead_s + cpu_s_per_sample
        if num_workers == 0 and self.main_s is not None:
            return self.main_s
        if num_workers > 0 and self.worker_s:
            return self.worker_s
        if num_workers > 0 and self.handover_s:
            return (loop_s if loop_s is not None else cpu_s_per_sample) + self.handover_s
        return loop_s

    def training_s(self, num_workers: int, cpu_s_per_sample: float) -> float:
        """The training thread's CPU per sample beside its step: with workers taking their
        batches (the model's hand-over where not measured); with none, all of the loading."""
        if num_workers > 0:
            return self.main_s if self.main_s is not None else 1 / PROCESS_OBJECTS_S
        thread_s = self.thread_s(0, cpu_s_per_sample)
        return thread_s if thread_s is not None else cpu_s_per_sample


def predict(
    num_workers: int,
    *,
    object_bytes: float,
    samples_per_object: float = 1.0,
    cpu_s_per_sample: float = 0.0,
    usable_cores: float = 1,
    storage: StorageParams = S3_DEFAULTS,
    consumer_rate: float | None = None,
    epoch_objects: float | None = None,
    costs: MeasuredCosts = MeasuredCosts(),
) -> Prediction:
    """Predicted loader samples/s with `num_workers` DataLoader workers, and what a training
    loop consuming `consumer_rate` samples/s sees of it (see module docstring), given what was
    measured of the loading beyond the transform's CPU (`costs`).

    `epoch_objects`: the objects one epoch deals to this rank's loader processes (None:
    unknown, or so many that whole epochs read as the steady rate): the rate is then over
    whole epochs (`epoch_rate`; workers above the objects are dealt none).

    The training thread's share of a core (`Prediction.training_share`) is what it is at the
    rate the loop runs: a step holds its core `costs.step_cpu_share` of 1 / consumer_rate s
    per sample, and taking the workers' batches costs `costs.training_s` per sample. The
    loop's rate depends on that share and the share on the rate, so the rate is the one at
    which they agree (`_agreeing_rate`)."""
    if num_workers < 0:
        raise ValueError(f"num_workers={num_workers} must be >= 0")
    if object_bytes < 0 or samples_per_object <= 0 or cpu_s_per_sample < 0:
        raise ValueError(f"{object_bytes=}, {samples_per_object=}, {cpu_s_per_sample=}")
    loader = _Loader(
        num_workers, object_bytes, samples_per_object, cpu_s_per_sample, usable_cores, storage,
        consumer_rate, epoch_objects, costs,
    )  # fmt: skip
    return loader.at(_agreeing_rate(loader.trained))


@dataclass(frozen=True)
class _Loader:
    """`predict`'s inputs, and its prediction at a given rate of the training loop."""

    num_workers: int
    object_bytes: float
    spo: float
    cpu_s_per_sample: float
    usable_cores: float  # fractional where other work holds part of the cores
    storage: StorageParams
    consumer_rate: float | None
    epoch_objects: float | None
    costs: MeasuredCosts

    @property
    def step_s(self) -> float:
        """Wall seconds per sample of the consumer's step (0: no consumer rate given)."""
        rate = self.consumer_rate
        return 1 / rate if rate is not None and rate > 0 else 0.0

    @property
    def spin_s(self) -> float:
        """Seconds per sample the step holds the training thread's core."""
        return self.step_s * self.costs.step_cpu_share

    def training_share(self, trained: float) -> float:
        """The training thread's share of a core at a loop rate of `trained` samples/s: the
        step's spin and, with workers, taking their batches; with none, all of the loading
        (which `loading_cores` gives the main process a core for)."""
        own = self.costs.training_s(self.num_workers, self.cpu_s_per_sample)
        return min(1.0, max(trained, 0.0) * (self.spin_s + own))

    def trained(self, trained: float) -> float:
        """The loop's rate when its training thread holds the share of a core it holds at
        `trained` (a decreasing function of `trained`: `_agreeing_rate` solves it)."""
        return self.at(trained).trained_samples_per_s

    def at(self, trained: float) -> Prediction:
        num_workers, spo, storage, costs = self.num_workers, self.spo, self.storage, self.costs
        processes = max(num_workers, 1)
        fetch_s = storage.first_byte_s + self.object_bytes / (storage.per_connection_mb_s * MB)
        cpu_obj = spo * self.cpu_s_per_sample
        k = storage.concurrent_reads
        if costs.process_s is not None:
            # measured in a loop: one process's reads' waits and its loading, in turn
            fetch_s, k = max(spo * costs.process_s - cpu_obj, 0.0), 1
        thread_s = costs.thread_s(num_workers, self.cpu_s_per_sample)
        # one request in flight: fetch and decode alternate; several: the reader fetches ahead
        per_process_s = fetch_s + cpu_obj if k == 1 else fetch_s / k
        if thread_s is not None:  # measured: one thread per process does it all
            per_process_s = max(per_process_s, spo * thread_s)
        elif k > 1:  # the reader pipelines requests; the process still hands over one at a time
            per_process_s = max(per_process_s, 1 / process_objects_per_s(self.object_bytes))
        latency = math.inf if per_process_s <= 0 else spo * processes / per_process_s
        share = self.training_share(trained)
        cores = loading_cores(num_workers, self.usable_cores, share)
        loading_s = thread_s if thread_s is not None else self.cpu_s_per_sample
        cpu = math.inf if loading_s <= 0 else cores / loading_s
        if costs.machine_s is not None and costs.machine_s > 0:
            # the sweep measured busy CPU without the spin: the spin holds its share beside it
            spin = min(max(trained, 0.0) * self.spin_s, 1.0)
            cpu = min(cpu, max(self.usable_cores - spin, 1e-9) / costs.machine_s)
        if storage.aggregate_mb_s is None or self.object_bytes <= 0:
            bandwidth = math.inf
        else:
            bandwidth = spo * storage.aggregate_mb_s * MB / self.object_bytes
        steady = min(latency, cpu, bandwidth)
        # one process reads no faster than its own ceiling, nor decodes faster than one core
        alone = min(latency / processes, math.inf if loading_s <= 0 else 1 / loading_s)
        start_s = epoch_start_s(storage, costs)
        rate = epoch_rate(steady, alone, processes, self.epoch_objects, spo, start_s)
        # on a tie name the CPU first (the ceiling users can act on offline); a serial process
        # that spends longer decoding than fetching is CPU-bound too
        bounds = {"cpu": cpu, "bandwidth": bandwidth, "latency": latency}
        bottleneck = min(bounds, key=lambda name: bounds[name])
        if bottleneck == "latency" and k == 1 and cpu_obj >= fetch_s:
            bottleneck = "cpu"
        if rate < (1 - NOISE_CAP) * steady:
            bottleneck = "objects"
        if math.isinf(rate):
            rate = 1e9  # nothing costs anything: a number, not infinity, for JSON
        loop = rate
        consumer = self.consumer_rate
        if num_workers > 0:
            # the training thread takes each batch from the workers between its steps, whether
            # the step holds the core or blocks: they take turns over the step's wall time
            receive = costs.main_s or 0.0
            if receive + self.step_s > 0:
                loop = min(rate, 1 / (receive + self.step_s))
        elif consumer is not None and consumer > 0:
            # the main thread's share of the loading and the step take turns, while the reader's
            # thread fetches on (with one request in flight the main thread fetches too)
            if thread_s is None:
                thread_s = self.cpu_s_per_sample + 1 / (spo * PROCESS_OBJECTS_S)
            main_s = 1 / rate if k == 1 else thread_s
            loop = 1 / max(1 / rate, main_s + 1 / consumer)
        return Prediction(
            num_workers, rate, latency, cpu, bandwidth, bottleneck, loop, share,
            min(alone, 1e9),
        )  # fmt: skip


def epoch_start_s(storage: StorageParams, costs: MeasuredCosts) -> float:
    """Seconds from an epoch's start to its first sample: as measured, else a first byte."""
    return storage.first_byte_s if costs.epoch_start_s is None else costs.epoch_start_s


def epoch_rate(
    steady: float,
    per_process: float,
    processes: int,
    epoch_objects: float | None,
    samples_per_object: float,
    start_s: float = 0.0,
) -> float:
    """Samples/s over whole epochs of `epoch_objects` objects, from the `steady` rate of all
    `processes` loader processes busy and `per_process`, the most one process reads alone.

    The datasets deal an epoch's objects whole, in turn, to the loader processes
    (`S3IterableDataset.shard`), so an epoch lasts at least its samples at the steady rate, and
    at least the samples of the process dealt the most (ceil(objects / processes) objects) at
    the rate one process reads alone; with fewer objects than processes, the processes above
    the objects read nothing. Every epoch also starts with nothing in flight: `start_s`
    (`epoch_start_s`: the reader's start and its first reads, begun at once) goes first."""
    if epoch_objects is None or epoch_objects < 1 or not 0 < steady < math.inf:
        return steady
    objects = round(epoch_objects)
    samples = objects * samples_per_object
    busiest = math.ceil(objects / max(processes, 1)) * samples_per_object
    seconds = start_s + max(samples / steady, busiest / per_process)
    return samples / seconds


def _agreeing_rate(trained_at: Callable[[float], float], rounds: int = 64) -> float:
    """The loop rate T with T == trained_at(T), for a `trained_at` that falls as T rises (a
    faster loop spins and receives more, leaving less CPU to load): bisection between 0 and
    the rate with no training share at all. That rate may be the 1e9 that stands for "nothing
    costs anything", so 64 halvings: 40 left 1e9 / 2^40, a thousandth of a sample/s, enough
    for more latency to read as a faster loader."""
    low, high = 0.0, trained_at(0.0)
    for _ in range(rounds):
        middle = (low + high) / 2
        if trained_at(middle) > middle:
            low = middle
        else:
            high = middle
    return low


def process_objects_per_s(object_bytes: float, cpu_s_per_object: float = 0.0) -> float:
    """The most objects/s one loader process takes in: PROCESS_OBJECTS_S small objects, or
    PROCESS_MB_S of large ones, and no more than its transform lets through (1 / its CPU
    seconds per object, when known): a process transforms its samples on one thread."""
    ceiling = PROCESS_OBJECTS_S
    if object_bytes > 0:
        ceiling = min(ceiling, PROCESS_MB_S * MB / object_bytes)
    if cpu_s_per_object > 0:
        ceiling = min(ceiling, 1 / cpu_s_per_object)
    return ceiling


def choose_workers(
    rates: Mapping[int, float],
    consumer_rate: float | None,
    *,
    headroom: float = HEADROOM,
    tolerance: float = NOISE_CAP,
) -> int:
    """The num_workers to use, given samples/s per candidate (measured or predicted).

    The smallest candidate reaching ``consumer_rate * headroom``; when the consumer rate is unknown
    or no candidate reaches it, the smallest within `tolerance` of the best candidate.
    """
    if not rates:
        raise ValueError("rates must not be empty")
    ordered = sorted(rates)
    if consumer_rate is not None:
        for w in ordered:
            if rates[w] >= consumer_rate * headroom:
                return w
    best = max(rates.values())
    return next(w for w in ordered if rates[w] >= (1 - tolerance) * best)

"""Throughput model: sanity, monotonicity (Hypothesis) and the num_workers quality bar."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.core.model import (
    MeasuredCosts,
    choose_workers,
    epoch_rate,
    loading_cores,
    predict,
    process_objects_per_s,
)
from advisor.core.reader_budget import (
    INFLIGHT_MAX,
    first_batch_s,
    inflight_bytes,
    requests_in_flight,
    worker_memory_bytes,
)
from advisor.core.storage import (
    LOCAL_NVME_DEFAULTS,
    LOCAL_READ_THREADS,
    LOCAL_SSD_DEFAULTS,
    S3_DEFAULTS,
    StorageParams,
)
from native_loader.config import ReaderConfig

MB = 1_000_000

object_sizes = st.floats(min_value=10e3, max_value=200e6)  # 10 KB - 200 MB
latencies = st.floats(min_value=0.0, max_value=0.1)  # 0 - 100 ms
cpu_costs = st.floats(min_value=0.0, max_value=0.005)  # 0 - 5 ms per sample
cores = st.integers(min_value=1, max_value=96)
workers = st.integers(min_value=0, max_value=64)
in_flight = st.integers(min_value=1, max_value=16)
samples_per_object = st.sampled_from([1.0, 10.0, 1000.0])
epochs = st.one_of(st.none(), st.integers(min_value=1, max_value=200))  # objects one epoch deals


def _storage(
    latency: float, k: int = 4, bw: float = 90.0, cap: float | None = 1250.0, local: bool = False
) -> StorageParams:
    return StorageParams("s", latency, bw, requests_in_flight=k, aggregate_mb_s=cap, local=local)


def test_defaults_are_documented_numbers() -> None:
    assert S3_DEFAULTS.first_byte_s == pytest.approx(0.030)
    assert S3_DEFAULTS.per_connection_mb_s == pytest.approx(90.0)
    assert S3_DEFAULTS.requests_in_flight > 1  # the native reader pipelines requests
    # ... exactly as many as the reader (and so the exported DataLoader) keeps in flight
    assert S3_DEFAULTS.requests_in_flight == ReaderConfig().max_inflight_requests


def test_hand_computed_points() -> None:
    # 1 MB objects, 30 ms + 1/90 s per GET, 4 in flight per process, no CPU: latency bound
    fetch = 0.030 + 1 / 90
    p = predict(2, object_bytes=MB, usable_cores=8, storage=_storage(0.030, 4))
    assert p.samples_per_s == pytest.approx(2 * 4 / fetch)
    assert p.bottleneck == "latency"
    # 4 ms of CPU per sample on 4 usable cores less the training thread's share: with no step,
    # taking the batches (the model's hand-over, 1 / PROCESS_OBJECTS_S per sample) at the rate T
    # itself, so T = (4 - T / 3000) / 0.004, T = 4 / (0.004 + 1 / 3000)
    p = predict(
        8, object_bytes=10e3, cpu_s_per_sample=0.004, usable_cores=4, storage=_storage(0.03)
    )
    assert p.samples_per_s == pytest.approx(4 / (0.004 + 1 / 3000), rel=1e-6)
    assert p.training_share == pytest.approx(p.samples_per_s / 3000, rel=1e-6)
    assert p.bottleneck == "cpu"
    # 150 MB shards: 1,250 MB/s NIC / 150 MB = 8.3 objects/s
    p = predict(64, object_bytes=150 * MB, usable_cores=96, storage=_storage(0.03))
    assert p.samples_per_s == pytest.approx(1250 / 150)
    assert p.bottleneck == "bandwidth"
    # one request in flight: fetch and decode alternate
    p = predict(
        1, object_bytes=0, cpu_s_per_sample=0.001, usable_cores=4, storage=_storage(0.01, 1)
    )
    assert p.samples_per_s == pytest.approx(1 / 0.011)


def test_zero_workers_loads_in_the_main_process() -> None:
    assert loading_cores(0, 16) == 1
    assert loading_cores(4, 16) == 4
    assert loading_cores(8, 2) == 1  # a whole core stays with a main process that spins
    assert loading_cores(1, 1) == 0  # ... on one core that leaves a worker nothing
    # a training process that only takes batches keeps its share of a core, not a whole one
    assert loading_cores(4, 4, training_share=0.25) == pytest.approx(3.75)
    assert loading_cores(4, 4, training_share=1.0) == 3
    kw = {"object_bytes": 1e5, "cpu_s_per_sample": 0.002, "usable_cores": 8}
    assert predict(0, **kw).samples_per_s == pytest.approx(predict(1, **kw).samples_per_s)


def test_nothing_costs_anything_gives_a_finite_number() -> None:
    p = predict(1, object_bytes=0, storage=_storage(0.0, cap=None))
    assert math.isfinite(p.samples_per_s)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"object_bytes": -1},
        {"object_bytes": 1, "samples_per_object": 0},
        {"object_bytes": 1, "cpu_s_per_sample": -1},
    ],
)
def test_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        predict(1, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_workers"):
        predict(-1, object_bytes=1)
    with pytest.raises(ValueError, match="requests_in_flight"):
        StorageParams("s", 0.01, 10, requests_in_flight=0)


@settings(max_examples=300, deadline=None)
@given(
    object_sizes, latencies, latencies, cpu_costs, cores, workers, in_flight, samples_per_object,
    st.booleans(), epochs,
)  # fmt: skip
def test_more_latency_never_increases_throughput(
    size: float, lat_a: float, lat_b: float, cpu: float, n_cores: int, w: int, k: int, spo: float,
    local: bool, epoch: int | None,
) -> None:  # fmt: skip
    low, high = sorted((lat_a, lat_b))
    kw = {"object_bytes": size, "cpu_s_per_sample": cpu, "usable_cores": n_cores,
          "epoch_objects": epoch}  # fmt: skip
    fast = predict(w, storage=_storage(low, k, local=local), samples_per_object=spo, **kw)
    slow = predict(w, storage=_storage(high, k, local=local), samples_per_object=spo, **kw)
    assert slow.samples_per_s <= fast.samples_per_s * (1 + 1e-9)


@settings(max_examples=300, deadline=None)
@given(
    object_sizes, latencies, cpu_costs, cores, workers, workers, in_flight, st.booleans(), epochs
)
def test_more_workers_never_lower_throughput_nor_exceed_the_cores(
    size: float, lat: float, cpu: float, n_cores: int, w_a: int, w_b: int, k: int, local: bool,
    epoch: int | None,
) -> None:  # fmt: skip
    few, many = sorted((w_a, w_b))
    kw = {"object_bytes": size, "cpu_s_per_sample": cpu, "usable_cores": n_cores,
          "epoch_objects": epoch}  # fmt: skip
    a = predict(few, storage=_storage(lat, k, local=local), **kw)
    b = predict(many, storage=_storage(lat, k, local=local), **kw)
    # on one core, workers share it with the training thread taking their batches: against 0
    # workers they gain only where the latency, not the CPU, bounds
    if few > 0 or n_cores > 1:
        assert b.samples_per_s >= a.samples_per_s * (1 - 1e-9)
    if cpu > 0:
        # never more than the cores left for loading can decode, however many workers: the
        # usable cores less the training thread's share at the predicted rate
        assert b.samples_per_s <= max(n_cores - b.training_share, 1) / cpu * (1 + 1e-6)
        assert b.samples_per_s <= max(n_cores, 1) / cpu * (1 + 1e-6)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(0, 32), st.floats(1.0, 1e6), min_size=1),
    st.one_of(st.none(), st.floats(1.0, 1e6)),
)
def test_choose_workers_contract(rates: dict[int, float], consumer: float | None) -> None:
    w = choose_workers(rates, consumer)
    best = max(rates.values())
    assert w in rates
    if consumer is not None and rates[w] >= 1.2 * consumer:
        assert all(rates[v] < 1.2 * consumer for v in rates if v < w)  # the smallest that does
    else:
        assert rates[w] >= 0.95 * best
        assert all(rates[v] < 0.95 * best for v in rates if v < w)


def test_choose_workers_needs_candidates() -> None:
    with pytest.raises(ValueError):
        choose_workers({}, None)


SWEEP = (0, 1, 2, 4, 8)


@settings(max_examples=400, deadline=None)
@given(
    object_sizes,
    latencies,
    cpu_costs,
    st.sampled_from([1, 2, 3, 4, 8, 9, 16, 64]),
    samples_per_object,
    st.one_of(st.none(), st.floats(1.0, 1e6)),
)
def test_quality_bar_against_exhaustive_sweep(
    size: float, lat: float, cpu: float, n_cores: int, spo: float, consumer: float | None
) -> None:
    """The rule's choice reaches >= 90% of the best of {0,1,2,4,8} within the caps (or the
    consumer rate if lower), under the same model; see docs/decision-flow.md "Quality bar"."""
    from advisor.decide.rules import HEADROOM, TOLERANCE

    kw = {
        "object_bytes": size,
        "samples_per_object": spo,
        "cpu_s_per_sample": cpu,
        "usable_cores": n_cores,
        "storage": _storage(lat),
    }
    cap = max(n_cores - 1, 0)
    candidates = range(min(1, cap), cap + 1)  # what NW-4 searches
    rates = {w: predict(w, **kw).samples_per_s for w in candidates}  # type: ignore[arg-type]
    chosen = choose_workers(rates, consumer, headroom=HEADROOM, tolerance=TOLERANCE)
    exhaustive = {w: predict(w, **kw).samples_per_s for w in SWEEP if w <= cap}  # type: ignore[arg-type]
    target = max(exhaustive.values())
    if consumer is not None:
        target = min(target, consumer)
    assert rates[chosen] >= 0.9 * target
    assert chosen <= cap


def test_local_nvme_is_faster_than_s3_for_small_objects() -> None:
    kw = {"object_bytes": 100e3, "usable_cores": 8}
    assert (
        predict(4, storage=LOCAL_NVME_DEFAULTS, **kw).samples_per_s
        > predict(4, storage=S3_DEFAULTS, **kw).samples_per_s
    )


def test_local_files_are_read_on_the_readers_read_ahead_threads() -> None:
    """The native reader reads local files ahead on its threads: as many at once as it has, never
    more, whatever requests in flight it may keep; a plain file system mount or a disk default
    alike."""
    local = StorageParams("copy", 0.0005, 100.0, requests_in_flight=256, local=True)
    assert local.concurrent_reads == LOCAL_READ_THREADS
    assert LOCAL_SSD_DEFAULTS.concurrent_reads == LOCAL_READ_THREADS
    kw = {"object_bytes": 2 * MB, "usable_cores": 8}
    fetch = 0.0005 + 2 * MB / (100.0 * MB)
    assert predict(1, storage=local, **kw).latency_bound == pytest.approx(
        LOCAL_READ_THREADS / fetch
    )
    one = StorageParams("open-read", 0.0005, 100.0, requests_in_flight=1, local=True)
    assert predict(1, storage=one, **kw).latency_bound == pytest.approx(1 / fetch)


def test_requests_in_flight_follow_what_one_process_takes_in() -> None:
    # small objects: the per-object ceiling (3,000/s); 1 MB and up: the byte ceiling (1,000 MB/s)
    assert process_objects_per_s(10_000) == pytest.approx(3000.0)
    assert process_objects_per_s(1 * MB) == pytest.approx(1000.0)
    assert process_objects_per_s(0) == pytest.approx(3000.0)
    # 10 KB at 100 ms: 2 x 3,000/s x 0.1 s = 600 -> the cap, 256
    small = requests_in_flight(0.1, 10_000, 90.0, process_objects_per_s(10_000))
    assert small == INFLIGHT_MAX == 256
    # 1 MB at 100 ms: 2 x 1,000/s x 111.1 ms = 222.2 -> 223, under the cap
    assert requests_in_flight(0.1, 1 * MB, 90.0, process_objects_per_s(1 * MB)) == 223
    # 1 MB at 30 ms, 90 MB/s: 2 x 1,000/s x (30 + 11.1 ms) = 82.2 -> 83
    assert requests_in_flight(0.03, 1 * MB, 90.0, process_objects_per_s(1 * MB)) == 83
    # a transform of 2 ms per object: the process takes in 500/s; at 100 ms 2 x 500 x 100.1 ms
    assert process_objects_per_s(10_000, 0.002) == pytest.approx(500.0)
    assert requests_in_flight(0.1, 10_000, 90.0, process_objects_per_s(10_000, 0.002)) == 101
    # nothing to hide: never below the reader's default
    assert requests_in_flight(0.0, 1 * MB, 1000.0, 1000.0) == ReaderConfig().max_inflight_requests


def test_byte_budget_holds_four_objects_within_a_ram_share() -> None:
    default, part = ReaderConfig().max_inflight_bytes, ReaderConfig().part_size
    # 200 MB objects: 4 x 200 MB = 95.4 parts -> 96 parts of 8 MiB = 768 MiB
    assert inflight_bytes(200 * MB, None, 2, 1) == 96 * part == 768 * 2**20
    # ... within a quarter of 24 GB over 3 processes (2 cores + main; 2 GB each): unchanged
    assert inflight_bytes(200 * MB, 24e9, 2, 1) == 768 * 2**20
    # ... a quarter of 4 GB over 3 processes is 333 MB: 39 whole parts
    assert inflight_bytes(200 * MB, 4e9, 2, 1) == 39 * part
    # ... 2 ranks on a 4-core, 8 GB node: the same share (4 GB and 3 processes per rank)
    assert inflight_bytes(200 * MB, 8e9, 4, 2) == 39 * part
    # ... never under the reader's default, however little RAM
    assert inflight_bytes(200 * MB, 1e9, 16, 1) == default
    # 1 MB objects: the default holds 268 of them
    assert inflight_bytes(1 * MB, None, 2, 1) == default
    assert inflight_bytes(0, 24e9, 2, 1) == default


def test_streamed_objects_are_never_held_whole() -> None:
    """Tar shards read as samples and text shards read as records stream: the budget holds two
    streams' read-ahead, not four objects, however large the shard."""
    default = ReaderConfig().max_inflight_bytes
    for size in (150 * MB, 200 * MB, 2000 * MB):
        assert inflight_bytes(size, None, 2, 1, streamed=True) == default
        assert inflight_bytes(size, None, 2, 1) > default
    # a worker's data memory: the budget and its prefetched batches, plus one whole object
    # only where objects are read whole
    whole = worker_memory_bytes(150 * MB, 768 * 2**20, 1 * MB, 2)
    streamed = worker_memory_bytes(150 * MB, default, 1 * MB, 2, streamed=True)
    assert whole == 768 * 2**20 + 150 * MB + 2 * MB
    assert streamed == default + 2 * MB


def test_a_streamed_shard_starts_its_first_batch_after_its_first_part() -> None:
    """The first batch of 150 MB shards read whole waits for a whole shard; streamed, for the
    batch's records (at least a part). It grows with the shard read whole, not streamed."""
    storage = S3_DEFAULTS  # 30 ms, 90 MB/s per request, 1,250 MB/s for the node
    kwargs = {"samples_per_object": 1e6, "batch_size": 64, "cpu_s_per_sample": 0.0}
    kwargs |= {"processes": 4}  # four workers start together and share the node's bandwidth
    whole = first_batch_s(object_bytes=150 * MB, storage=storage, **kwargs)
    streamed = first_batch_s(object_bytes=150 * MB, storage=storage, streamed=True, **kwargs)
    part_s = ReaderConfig().part_size / (90.0 * MB)
    assert streamed == pytest.approx(0.03 + part_s)
    assert whole == pytest.approx(0.03 + 4 * 150 / 1250)
    assert whole > 4 * streamed
    larger = first_batch_s(object_bytes=600 * MB, storage=storage, streamed=True, **kwargs)
    assert larger == pytest.approx(streamed)
    assert first_batch_s(object_bytes=600 * MB, storage=storage, **kwargs) > whole
    # small objects: the batch's objects, fetched in parallel, and its transform
    small = first_batch_s(
        object_bytes=100_000, samples_per_object=1, batch_size=32, cpu_s_per_sample=0.001,
        storage=StorageParams("s3", 0.03, 90.0, requests_in_flight=32),
    )  # fmt: skip
    assert small == pytest.approx(0.03 + 3.2 * MB / (90.0 * MB) + 0.032)


def test_the_measured_cpu_costs_of_loading() -> None:
    """The cores' busy CPU per sample bounds the loader at usable cores over it; the training
    thread's measured CPU replaces transform + overhead with 0 workers, and with workers takes
    turns with the step."""
    storage = _storage(0.020, k=256, bw=100.0, cap=None)
    kw = dict(object_bytes=20e3, cpu_s_per_sample=0.0003, usable_cores=2, storage=storage)
    plain = predict(0, costs=MeasuredCosts(overhead_s=0.00002), **kw)  # type: ignore[arg-type]
    assert plain.samples_per_s == pytest.approx(1 / 0.00032, rel=1e-6)
    # the reader's threads, a local server and the network stack: 1.5 ms of the 2 cores a sample
    busy = predict(0, costs=MeasuredCosts(overhead_s=0.00002, machine_s=0.0015), **kw)  # type: ignore[arg-type]
    assert busy.samples_per_s == pytest.approx(2 / 0.0015, rel=1e-6)
    assert busy.bottleneck == "cpu"
    main = predict(0, costs=MeasuredCosts(overhead_s=0.00002, main_s=0.0004), **kw)  # type: ignore[arg-type]
    assert main.samples_per_s == pytest.approx(1 / 0.0004, rel=1e-6)
    # with workers and an 800/s consumer: 0.25 ms to take each sample, then 1.25 ms of step
    one = predict(1, consumer_rate=800.0, costs=MeasuredCosts(main_s=0.00025), **kw)  # type: ignore[arg-type]
    assert one.trained_samples_per_s == pytest.approx(1 / 0.0015, rel=1e-6)
    # ... and without a consumer the training thread's share still bounds what it takes
    fast = predict(1, costs=MeasuredCosts(main_s=0.001), **kw)  # type: ignore[arg-type]
    assert fast.trained_samples_per_s == pytest.approx(1000.0, rel=1e-6)
    assert fast.trained_samples_per_s < fast.samples_per_s


def test_a_workers_measured_cpu_is_its_time_per_sample() -> None:
    """Measured on 2 cores (2,000 local 20 KB files, batch 16): one worker at 1.04 cores read
    8,446 samples/s, 122 us of its own CPU a sample; the decode loop (40 us) plus the hand-over
    (58 us) had said 98 us. Where the worker's own CPU is measured, that is its time."""
    local = StorageParams("local", 0.00001, 1500.0, requests_in_flight=4, local=True)
    kw = dict(object_bytes=20e3, cpu_s_per_sample=0.00002, usable_cores=2, storage=local)
    guessed_costs = MeasuredCosts(overhead_s=0.00002, handover_s=0.000058)
    guessed = predict(1, costs=guessed_costs, **kw)  # type: ignore[arg-type]
    assert guessed.samples_per_s == pytest.approx(1 / 0.000098, rel=1e-6)
    measured_costs = MeasuredCosts(overhead_s=0.00002, handover_s=0.000058, worker_s=0.000122)
    measured = predict(1, costs=measured_costs, **kw)  # type: ignore[arg-type]
    assert measured.samples_per_s == pytest.approx(1 / 0.000122, rel=1e-6)
    # two workers each take as long per sample, on the 2 cores less the training thread's
    # share (33 us a sample taking their batches): R = (2 - 33 us x R) / 122 us
    two_costs = MeasuredCosts(overhead_s=0.00002, worker_s=0.000122, main_s=0.000033)
    two = predict(2, costs=two_costs, **kw)  # type: ignore[arg-type]
    assert two.trained_samples_per_s == pytest.approx(2 / 0.000155, rel=0.01)


def test_a_worker_handing_large_samples_over_is_slower_than_no_worker() -> None:
    """Measured on 2 cores (40 local 8 MB files decoded to 8 MB tensors, 32 a batch: the trial
    of tests/decide/test_large_samples.py): with 0 workers the training thread spent 2.2 ms a
    sample and the cores 3.5 ms; the decode loop 1.7 ms, and the hand-over probe 9.4 ms in the
    worker and 1.7 ms in the training thread. The sweep measured 356 samples/s with no worker
    and 61 with one: a worker pays the hand-over of every byte, which 0 workers never do."""
    local = StorageParams("measured-local", 17e-6, 3967.7, requests_in_flight=32, local=True)
    kw = dict(object_bytes=8 * MB, cpu_s_per_sample=0.001585, usable_cores=2, storage=local,
              epoch_objects=40)  # fmt: skip
    loop = MeasuredCosts(overhead_s=0.000117)  # the decode loop
    none_costs = MeasuredCosts(overhead_s=0.000117, main_s=0.0022, machine_s=0.0035)
    none = predict(0, costs=none_costs, **kw)  # type: ignore[arg-type]
    one_costs = MeasuredCosts(overhead_s=0.000117, main_s=0.00166, handover_s=0.009375)
    one = predict(1, costs=one_costs, **kw)  # type: ignore[arg-type]
    blind = predict(1, costs=loop, **kw)  # type: ignore[arg-type]  # the decode loop alone: no hand-over
    assert one.samples_per_s < none.samples_per_s < blind.samples_per_s
    # a worker's one thread: the decode loop and the hand-over
    assert one.samples_per_s == pytest.approx(1 / (0.001702 + 0.009375), rel=0.05)
    # without a measured decode loop, the transform and the hand-over
    bare = predict(1, object_bytes=8 * MB, cpu_s_per_sample=0.001585, usable_cores=2,
                   storage=local, costs=MeasuredCosts(handover_s=0.009375))  # fmt: skip
    assert bare.samples_per_s == pytest.approx(1 / (0.001585 + 0.009375), rel=0.05)


def test_a_spinning_step_holds_its_core_for_its_duty_cycle_not_the_whole_of_it() -> None:
    """400 KB objects, 6 ms of CPU per sample, 2 cores, a GPU taking 5,000 samples/s: the step
    spins 1 / 5,000 s per sample, at ~300 samples/s 6% of a core, so 2 workers load on ~1.9
    cores. Counting a whole core for it predicted no gain from the second worker."""
    kw = {
        "object_bytes": 400e3, "cpu_s_per_sample": 0.006, "usable_cores": 2,
        "storage": _storage(0.002, 32), "consumer_rate": 5000.0,
        "costs": MeasuredCosts(main_s=1e-4),
    }  # fmt: skip
    one, two = predict(1, **kw), predict(2, **kw)  # type: ignore[arg-type]
    assert one.trained_samples_per_s == pytest.approx(1 / 0.006, rel=0.01)
    assert two.trained_samples_per_s >= 1.8 * one.trained_samples_per_s
    rate = two.trained_samples_per_s
    assert two.training_share == pytest.approx(rate * (1 / 5000 + 1e-4), rel=1e-3)
    # a GPU the loaders keep up with holds its core all the time: one core loads
    slow = predict(2, **{**kw, "consumer_rate": 150.0})  # type: ignore[arg-type]
    assert slow.trained_samples_per_s == pytest.approx(150.0 / (1 + 150.0 * 1e-4), rel=1e-3)
    assert slow.training_share == pytest.approx(1.0, rel=1e-3)


def test_an_epoch_lasts_as_long_as_the_process_dealt_the_most_objects() -> None:
    """12 shards dealt to 7 workers: five read two, two read one, so the epoch lasts two shards'
    time and 7 workers read as 6 do (12 / 14 of their steady rate); 12 workers read all 12 at
    once, and 16 read no faster (four get nothing). Each epoch waits a first byte before its
    first sample arrives."""
    steady = {p: 100.0 * p for p in (6, 7, 12, 16)}  # 100 samples/s a process, 50 a shard
    rates = {p: epoch_rate(steady[p], 100.0, p, 12, 50) for p in steady}
    assert rates[7] == pytest.approx(700.0 * 12 / 14) == pytest.approx(rates[6])
    assert rates[12] == pytest.approx(1200.0) == pytest.approx(rates[16])
    assert epoch_rate(600.0, 100.0, 6, 12, 50, start_s=0.1) == pytest.approx(600 / (1 + 0.1))
    assert epoch_rate(600.0, 100.0, 6, None, 50) == 600.0  # unknown: the steady rate
    # through the model: 16 workers over 12 shards name the dealing as what holds them back
    kw = {
        "object_bytes": 5e6,
        "samples_per_object": 50.0,
        "cpu_s_per_sample": 0.003,
        "usable_cores": 32,
        "storage": _storage(0.0, 32, cap=None),
        "epoch_objects": 12,
    }
    twelve, sixteen = predict(12, **kw), predict(16, **kw)  # type: ignore[arg-type]
    assert sixteen.samples_per_s == pytest.approx(twelve.samples_per_s, rel=1e-6)
    assert sixteen.bottleneck == "objects" and twelve.bottleneck != "objects"


def test_every_epoch_of_a_small_set_waits_its_measured_start() -> None:
    """16 objects of 8 MB a epoch at 2.5 ms each, with 0 workers: an epoch that waits 5 ms
    for its first sample (the reader's start and its first reads, as the trial measures it)
    reads at 16 / (40 ms + 5 ms), not the steady 400/s nor the rate a first byte allows."""
    kw = {
        "object_bytes": 8e6,
        "cpu_s_per_sample": 0.0025,
        "storage": _storage(1e-5, 4, bw=10_000.0, cap=None, local=True),
        "epoch_objects": 16,
    }
    started = MeasuredCosts(main_s=0.0025, epoch_start_s=0.005)
    measured = predict(0, **kw, costs=started)  # type: ignore[arg-type]
    assert measured.samples_per_s == pytest.approx(16 / 0.045, rel=0.01)
    first_byte = predict(0, **kw, costs=MeasuredCosts(main_s=0.0025))  # type: ignore[arg-type]
    assert first_byte.samples_per_s == pytest.approx(16 / (0.04 + 1e-5), rel=0.01)
    endless = {**kw, "epoch_objects": None}
    assert predict(0, **endless, costs=started).samples_per_s == pytest.approx(400.0, rel=0.01)  # type: ignore[arg-type]


def test_a_blocking_step_takes_turns_with_taking_batches_but_leaves_its_core() -> None:
    """A 10 ms step of 8 samples and 0.5 ms of the training thread's CPU a sample to take the
    workers' batches: whatever the step does with its core, a sample every 1.25 + 0.5 ms at
    most. A step that spins holds its core meanwhile, so the one worker on 1 core loads on
    what is left; one that blocks (its CPU share 0) leaves the worker the core."""
    kw = {
        "object_bytes": 0.0, "cpu_s_per_sample": 0.001, "usable_cores": 1,
        "storage": _storage(0.0, 32, cap=None), "consumer_rate": 800.0,
    }  # fmt: skip
    spinning = predict(1, costs=MeasuredCosts(main_s=0.0005), **kw)  # type: ignore[arg-type]
    blocking = predict(1, costs=MeasuredCosts(main_s=0.0005, step_cpu_share=0.0), **kw)  # type: ignore[arg-type]
    assert blocking.trained_samples_per_s == pytest.approx(1 / (0.00125 + 0.0005), rel=1e-3)
    assert spinning.trained_samples_per_s < 0.7 * blocking.trained_samples_per_s
    assert blocking.training_share == pytest.approx(blocking.trained_samples_per_s * 0.0005)
    with pytest.raises(ValueError, match="step_cpu_share"):
        MeasuredCosts(step_cpu_share=1.5)


def test_a_loops_measured_process_time_stands_in_for_the_storage() -> None:
    """A loop's loading process took 5 ms a sample (4 of them waiting on its reads, 1 ms of
    CPU): each worker reads 200 samples/s whatever the storage's defaults say, so 3 workers on
    4 cores read 600; its CPU floors the time (a process never loads faster than it decodes)."""
    kw = {"object_bytes": 0.0, "cpu_s_per_sample": 0.001, "usable_cores": 4}
    measured = MeasuredCosts(process_s=0.005, epoch_start_s=0.0)
    for storage in (S3_DEFAULTS, LOCAL_NVME_DEFAULTS):
        three = predict(3, storage=storage, costs=measured, **kw)  # type: ignore[arg-type]
        assert three.samples_per_s == pytest.approx(600.0, rel=1e-6)
        assert three.bottleneck == "latency"
    quick = MeasuredCosts(process_s=0.0001)
    assert predict(1, costs=quick, **kw).samples_per_s == pytest.approx(1000.0)  # type: ignore[arg-type]


def test_the_shards_dealt_whole_cap_a_loops_workers() -> None:
    """A loop's data set of 3 shards: 3 workers read them at once, a fourth gets none, and 2
    workers take two shards' time an epoch (the model's own dealing, `epoch_rate`)."""
    kw = {"object_bytes": 0.0, "usable_cores": 8, "epoch_objects": 3}
    costs = MeasuredCosts(process_s=0.01, epoch_start_s=0.0)
    rates = {w: predict(w, costs=costs, **kw).samples_per_s for w in (2, 3, 4)}  # type: ignore[arg-type]
    assert rates[3] == pytest.approx(300.0) == pytest.approx(rates[4])
    assert rates[2] == pytest.approx(150.0)


def test_measured_cpu_costs_run_faster_on_faster_cores_and_wall_times_do_not() -> None:
    costs = MeasuredCosts(
        overhead_s=0.002, main_s=0.004, machine_s=None, handover_s=0.001, worker_s=0.006,
        process_s=0.01, step_cpu_share=0.5, epoch_start_s=0.2,
    )  # fmt: skip
    assert costs.on_cores(2.0) == MeasuredCosts(
        overhead_s=0.001, main_s=0.002, machine_s=None, handover_s=0.0005, worker_s=0.003,
        process_s=0.01, step_cpu_share=0.5, epoch_start_s=0.2,
    )  # fmt: skip


def test_the_most_direct_measure_of_a_loading_thread_wins() -> None:
    """With 0 workers the training thread's own loading; with workers a worker's own CPU, else
    the decode loop (or the transform) and the hand-over; nothing measured: None."""
    all_of_them = MeasuredCosts(overhead_s=0.001, main_s=0.004, handover_s=0.002, worker_s=0.005)
    assert all_of_them.thread_s(0, 0.003) == 0.004
    assert all_of_them.thread_s(2, 0.003) == 0.005
    no_worker = dataclasses.replace(all_of_them, worker_s=None)
    assert no_worker.thread_s(2, 0.003) == pytest.approx(0.001 + 0.003 + 0.002)
    assert MeasuredCosts(handover_s=0.002).thread_s(1, 0.003) == pytest.approx(0.005)
    assert MeasuredCosts().thread_s(1, 0.003) is None
    assert MeasuredCosts().training_s(0, 0.003) == 0.003
    assert MeasuredCosts().training_s(1, 0.003) == pytest.approx(1 / 3000)

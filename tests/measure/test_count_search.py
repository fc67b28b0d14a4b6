"""The count search (`advisor.measure.trial.search`) on the machines people train on, without
the hardware: the real search and the real choice (NW-3's `choose_measured`) driven over
synthetic rate curves, each count measured in the trial's slices with +-10% noise per slice;
and a plan for each machine from a trial on a share of it (1 core, half of one): the model
(`predict`, NW-4's `choose_workers`) given the costs per sample the share measured."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest

from advisor.core.model import MeasuredCosts, choose_workers, predict
from advisor.core.storage import StorageParams
from advisor.decide.facts.measured import choose_measured
from advisor.measure.trial.counts import SLICES_PER_MODE
from advisor.measure.trial.probe_results import StorageProbe
from advisor.measure.trial.results import STEP_NONE, STEP_SLEEP, STEP_SPIN, LoaderPoint, summarise
from advisor.measure.trial.search import CountSearch, measured_ceiling, step_modes
from advisor.measure.trial.sweep import MIN_SLICE_SECONDS

Curve = Callable[[int], float]
NOISE = 0.10
SEEDS = range(10)
# What the sweep of a 30 s trial has once the probes have run (60% of the budget), with one
# step model: a fast GPU's spin holds a small share of a large machine's cores (`step_modes`).
SWEEP_SECONDS = 18.0
LIMIT = int(SWEEP_SECONDS // (MIN_SLICE_SECONDS * SLICES_PER_MODE))


def rising_then_flat(cores: int) -> Curve:
    knee = max(2, round(0.4 * cores))  # the cores' CPU ceiling
    return lambda w: 80.0 if w == 0 else 100.0 * min(w, knee)


def rising_then_falling(cores: int) -> Curve:
    peak = max(2, round(0.3 * cores))  # then memory and contention take half back by the cores
    return lambda w: (
        80.0 if w == 0 else 100.0 * w if w <= peak else 100.0 * peak * (1 - (w - peak) / 2 / cores)
    )


def flat_from_one(cores: int) -> Curve:
    return lambda w: 600.0 if w == 0 else 1000.0


def early_latency(cores: int) -> Curve:
    return lambda w: 50.0 if w == 0 else 100.0 * min(w, 3)  # the storage's ceiling at 3


CURVES = {
    "rising-then-flat": rising_then_flat,
    "rising-then-falling": rising_then_falling,
    "flat-from-1": flat_from_one,
    "saturating-early-on-latency": early_latency,
}
# cores per rank: 8, 32 and 96 cores, and 8 ranks on 96 cores
MACHINES = {"8 cores": 8, "32 cores": 32, "96 cores": 96, "8 ranks on 96 cores": 12}


def models(curve: Curve, cores: int) -> dict[str, dict[int, float]]:
    """The model's predictions: right, and wrong by half either way about where the curve
    bends (a model that misjudges the cores' share)."""
    return {
        "right": {w: curve(w) for w in range(cores + 1)},
        "bends at half": {w: curve(min(cores, 2 * w)) for w in range(cores + 1)},
        "bends at double": {w: curve(w // 2) for w in range(cores + 1)},
    }


def search_and_choose(
    curve: Curve, cores: int, predicted: Mapping[int, float], seed: int, limit: int = LIMIT
) -> tuple[int, list[int]]:
    """The count NW-3 chooses after the search measured `curve` (noisy slices): and the counts
    measured."""
    rng = random.Random(seed)
    search = CountSearch(cores, predicted, limit)
    points: list[LoaderPoint] = []

    def measure(w: int) -> None:
        for _ in range(SLICES_PER_MODE):
            rate = curve(w) * (1 + rng.uniform(-NOISE, NOISE))
            points.append(LoaderPoint(w, False, None, 1, 1.0, rate, 0.0, 0.0, 0.0, step=STEP_SPIN))

    for w in search.first():
        measure(w)
    while True:
        wanted = search.next_count({c.num_workers: c.median for c in summarise(points)})
        if wanted is None:
            break
        assert wanted not in {p.num_workers for p in points}, wanted
        measure(wanted)
    counts = {c.num_workers: c for c in summarise(points)}
    assert len(counts) <= limit
    return choose_measured(counts, None)[0], sorted(counts)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("shape", CURVES)
def test_the_search_finds_a_count_within_5_percent_of_the_best(machine: str, shape: str) -> None:
    """On every machine and curve, with the model right or wrong by half, the chosen count
    reads within 5% of the curve's best in 9 of 10 noise draws and within 15% in all: two
    counts 10% apart can swap places in a 2-slice median with +-10% noise per slice, which no
    search prevents; a search that stopped below the best would miss in every draw."""
    cores = MACHINES[machine]
    curve = CURVES[shape](cores)
    best = max(curve(w) for w in range(cores + 1))
    for model, predicted in models(curve, cores).items():
        shares = [
            curve(search_and_choose(curve, cores, predicted, seed)[0]) / best for seed in SEEDS
        ]
        within = sum(share >= 0.95 for share in shares)
        assert within >= len(SEEDS) - 1, (model, shares)
        assert min(shares) >= 0.85, (model, shares)


def test_the_search_goes_up_while_the_best_is_the_highest() -> None:
    """A model that sees one loading core on 2 cores (the spin counted as a whole core) chose
    1 worker: with the budget for two counts measured first, the search still measures 2 while
    the rates rise."""
    wrong = {0: 140.0, 1: 145.0, 2: 146.0}
    search = CountSearch(2, wrong, limit=3)
    assert search.every and search.first() == [0, 1, 2]
    narrow = CountSearch(2, wrong, limit=2)
    assert narrow.first() == [0, 1] and narrow.next_count({0: 140.0, 1: 145.0}) is None  # budget
    wide = CountSearch(8, {0: 140.0, **dict.fromkeys(range(1, 9), 145.0)}, limit=4)
    assert wide.first() == [0, 1]
    # rising at 1, no goal known: a step towards the cores with the counts left
    nxt = wide.next_count({0: 140.0, 1: 145.0})
    assert nxt is not None and 2 <= nxt <= 8
    # the consumer's goal reached at the best: nothing above is worth measuring; it refines
    goal = CountSearch(8, {w: 100.0 * w for w in range(9)}, limit=6, goal=360.0)
    assert goal.first() == [0, 4]
    assert goal.next_count({0: 80.0, 4: 400.0}) == 2  # below it, fewer workers may do
    # a measured ceiling: the count that reaches it at the rate per worker measured
    assert CountSearch(96, {}, limit=6).next_count({0: 80.0, 8: 800.0}, ceiling=4000.0) == 40
    # ... a ceiling the measurement exceeds was estimated wrong: no goal, no stop
    assert CountSearch(96, {}, limit=6).next_count({0: 80.0, 8: 800.0}, ceiling=500.0) is not None


def test_the_search_stops_where_the_neighbours_are_measured() -> None:
    search = CountSearch(8, {w: 100.0 * min(w, 3) for w in range(9)}, limit=8)
    # the widest gap next to the best (4): above it, where a peak may hide
    assert search.next_count({0: 50.0, 2: 200.0, 4: 300.0, 8: 290.0}) == 6
    # ... below it, where fewer workers may read as fast
    assert search.next_count({0: 50.0, 2: 200.0, 6: 300.0, 7: 290.0}) == 4
    assert search.next_count({0: 50.0, 1: 100.0, 2: 200.0, 3: 300.0, 4: 250.0}) is None


def test_step_models_are_both_measured_only_where_they_can_disagree() -> None:
    assert step_modes(None, 500.0, 2) == (STEP_NONE,)
    # a 300/s step at ~270/s spins 90% of a core: on 2 cores that moves the rate
    assert step_modes(300.0, 270.0, 2) == (STEP_SLEEP, STEP_SPIN)
    # a 5,000/s GPU at ~270/s: 5% of one core over 2, within the noise
    assert step_modes(5000.0, 270.0, 2) == (STEP_SPIN,)
    # 96 cores: even a step that spins most of a core moves the loaders' cores by 1%
    assert step_modes(1000.0, 900.0, 96) == (STEP_SPIN,)


def test_the_measured_ceiling_is_the_lowest_of_the_cores_and_the_storage() -> None:
    def point(w: int, busy: float | None) -> LoaderPoint:
        return LoaderPoint(w, False, None, 1, 1.0, 100.0, 0, 0, 0, machine_cpu_s_per_sample=busy)

    points = [point(1, 0.004), point(1, 0.006), point(2, None)]
    assert measured_ceiling(points, 1, cores=2, storage=None, spo=1.0) == pytest.approx(400.0)
    assert measured_ceiling(points, 2, cores=2, storage=None, spo=1.0) is None
    rising = StorageProbe(10, 10, 0.01, 0.02, 50.0, ((1, 50.0, 100.0), (2, 100.0, 200.0)))
    saturating = StorageProbe(
        10, 10, 0.01, 0.02, 50.0, ((1, 50.0, 100.0), (2, 100.0, 150.0), (4, 101.0, 151.0),
                                   (8, 101.0, 150.0)),
    )  # fmt: skip
    assert measured_ceiling(points, 1, cores=2, storage=rising, spo=1.0) == pytest.approx(400.0)
    assert measured_ceiling(points, 1, cores=2, storage=saturating, spo=2.0) == pytest.approx(302)


# A plan for a larger machine from a trial on a share of a smaller one (issue 56): the trial
# measures costs per sample on its share, the model carries them to the whole machine's cores.


@dataclass(frozen=True)
class Costs:
    """A loader's costs per sample (seconds) and its storage, the same on any share of a
    machine: what a trial on a share measures and the model carries to a whole machine.

    transform_s: the transform's CPU; alone_s: the training thread's with 0 workers (all of the
    loading); worker_s: a worker's own (reading, the transform, the hand-over); main_s: the
    training thread's taking a worker's batch; beside_s: busy CPU beside those threads (the
    readers' threads, the network stack); first_byte_s and in_flight: the storage's first byte
    and the GETs one loader process keeps open; storage_per_s: the storage's ceiling in
    samples/s (None: none); contention: each worker beyond the first slows every worker by this
    share (memory bandwidth and caches, which the model has no term for)."""

    transform_s: float
    alone_s: float
    worker_s: float
    main_s: float
    beside_s: float
    first_byte_s: float
    in_flight: int
    storage_per_s: float | None = None
    contention: float = 0.003

    def curve(self, cores: float) -> Curve:
        """What a machine of `cores` reads per count: the lowest of the storage's ceilings,
        the loading threads' and the cores' (every thread's CPU per sample over the cores)."""

        def rate(w: int) -> float:
            ceilings = [self.in_flight * max(w, 1) / self.first_byte_s]
            if self.storage_per_s is not None:
                ceilings.append(self.storage_per_s)
            if w == 0:
                ceilings += [1 / self.alone_s, cores / (self.alone_s + self.beside_s)]
            else:
                worker = self.worker_s * (1 + self.contention * (w - 1))
                busy = worker + self.main_s + self.beside_s  # every thread's CPU a sample
                ceilings += [w / worker, 1 / self.main_s, cores / busy]
            return min(ceilings)

        return rate


# After the four sets of `python -m bench plan-check`, with costs of the order its trials
# measured: S3 with few GETs in flight (latency binds: 400 samples/s a process), CPU-bound
# JPEGs, tar shards (a shard's first byte spread over its samples) on a storage that serves
# 1,000 samples/s, and text records (the training thread's hand-over binds).
PLAN_COSTS = {
    "S3 at latency": Costs(0.0003, 0.0004, 0.00055, 0.00008, 0.0003, 0.020, 8),
    "CPU-bound JPEGs": Costs(0.0035, 0.0036, 0.0036, 0.00014, 0.0002, 0.005, 32),
    "tar shards on a storage ceiling": Costs(0.0023, 0.0024, 0.0025, 0.0002, 0.0003, 0.0004, 32,
                                             storage_per_s=1000.0),
    "text records": Costs(0.000002, 0.00002, 0.000012, 0.000007, 0.00001, 0.00001, 32),
}  # fmt: skip
PLAN_SHARES = (1.0, 0.5)
OBJECT_BYTES = 100_000


def measured_on_share(costs: Costs, share: float, rng: random.Random) -> dict[str, object]:
    """`predict`'s inputs as a trial on `share` cores measures them, for a plan with workers:
    it reads the share's curve at 1 worker, each reading within +-10% of the truth, and
    divides the CPU each thread and the share's cores spent over its window by the samples it
    counted there (the costs per sample, off by as much as the reading); its probes read the
    transform's CPU, the first byte and the storage's ceiling within +-10% too."""

    def noisy(value: float) -> float:
        return value * (1 + rng.uniform(-NOISE, NOISE))

    one = costs.curve(share)(1)
    read = noisy(one)  # the share's rate at 1 worker, as the trial read it
    worker, main = costs.worker_s * one / read, costs.main_s * one / read
    busy = min(share, one * (costs.worker_s + costs.main_s + costs.beside_s))  # cores busy
    transform = min(noisy(costs.transform_s), worker)
    aggregate = None
    if costs.storage_per_s is not None:  # the storage probe's ceiling, in MB/s
        aggregate = noisy(costs.storage_per_s) * OBJECT_BYTES / 1e6
    storage = StorageParams(
        "s3", noisy(costs.first_byte_s), 1e6, requests_in_flight=costs.in_flight,
        aggregate_mb_s=aggregate, measured=True,
    )  # fmt: skip
    return {
        "object_bytes": OBJECT_BYTES, "cpu_s_per_sample": transform, "storage": storage,
        "costs": MeasuredCosts(
            overhead_s=max(noisy(costs.alone_s) - transform, 0.0), main_s=main,
            worker_s=worker, machine_s=busy / read,
        ),
    }  # fmt: skip


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("share", PLAN_SHARES)
@pytest.mark.parametrize("name", PLAN_COSTS)
def test_a_plan_from_a_shares_costs_chooses_within_10_percent_of_the_whole_machines_best(
    machine: str, share: float, name: str
) -> None:
    """A model given what a trial on 1 core (or half of one) measured, planning for the
    machine's cores, chooses a count that reads within 10% of the best on that machine's own
    curve, with no consumer rate and with one only the whole machine keeps up with: in 9 of 10
    noise draws, and within 25% in all (a ceiling read 10% low and a worker 10% fast put the
    count below a knee within 5% of it, which no plan prevents). The curve is not the model's
    (its workers contend for memory, which the model has no term for); a curve that falls
    beyond the share's counts is for the search on the machine itself, above."""
    cores = MACHINES[machine]
    costs = PLAN_COSTS[name]
    truth = costs.curve(cores)
    best = max(truth(w) for w in range(cores + 1))
    for consumer in (None, 0.6 * best):
        goal = best if consumer is None else consumer  # what training can take
        shares = []
        for seed in SEEDS:
            inputs = measured_on_share(costs, share, random.Random(seed))
            rates = {
                w: predict(w, usable_cores=cores, **inputs).samples_per_s  # type: ignore[arg-type]
                for w in range(1, cores + 1)
            }
            chosen = choose_workers(rates, consumer)
            shares.append(round(min(truth(chosen), goal) / min(best, goal), 3))
        assert sum(s >= 0.90 for s in shares) >= len(SEEDS) - 1, (consumer, shares)
        assert min(shares) >= 0.75, (consumer, shares)

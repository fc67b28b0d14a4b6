"""The model on large samples, fed what a real trial measured: 40 objects of 8 MB in a local
folder, decoded to 8 MB tensors (the default decoder for binary files), 32 a batch, on 2 cores.

A DataLoader worker hands every byte of its batch over through fresh shared memory, which the
training process with 0 workers never does: on this set one worker loads slower than none, and
the model must say so from the trial's measurements, whether the sweep measured the worker
counts or only the hand-over probe did.

Recorded on the 2-core development machine (load average 1.1) with this branch's trial:
    for i in $(seq -w 0 39); do head -c 8000000 /dev/urandom > data/000$i.bin; done
    python -m advisor trial data/ --batch-size 32 --seconds 20 --json
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.core.workload import Workload
from advisor.decide.recommend import recommend
from advisor.measure.trial.probe_results import DecodeCost, HandoverCost, StorageProbe
from advisor.measure.trial.results import LoaderPoint, TrialResult, TrialSetup, summarise
from tests.builders import make_hardware, make_profile

MS = 1e-3
MB = 10**6


def _slice(
    workers: int, rate: float, main_ms: float, machine_ms: float, worker_ms: float | None,
    steady: bool = True,
) -> LoaderPoint:  # fmt: skip
    return LoaderPoint(
        workers, False, 2 if workers else None, round(rate * 3), 3.0, rate, rate * 8, 0.2,
        790 * 2**20,
        main_cpu_s_per_sample=main_ms * MS, machine_cpu_s_per_sample=machine_ms * MS,
        steady=steady, worker_cpu_s_per_sample=None if worker_ms is None else worker_ms * MS,
    )  # fmt: skip


# The sweep's slices (interleaved 0, 1, 2, 0, 1, 2): samples/s and the CPU per sample of the
# training thread, the cores and the workers; the last one's window was too short for a rate.
SWEEP = (
    _slice(0, 348.5, 2.238, 3.503, None),
    _slice(1, 60.9, 1.404, 19.250, 18.000),
    _slice(2, 110.4, 1.308, 16.250, 14.875),
    _slice(0, 362.4, 2.163, 3.500, None),
    _slice(1, 61.4, 1.388, 19.000, 17.750),
    _slice(2, 118.6, 1.345, 16.500, 14.917, steady=False),
)
DECODE = DecodeCost("default decoder for binary", 40, 1.585 * MS, 8 * MB, 1.702 * MS, 8 * MB)
# the hand-over probe: 8-sample batches from one worker, its CPU and the training thread's
HANDOVER = HandoverCost(32, 8, 8 * MB, 9.375 * MS, 1.660 * MS)
STORAGE = StorageProbe(
    492, 3_936_000_000, 17e-6, 36e-6, 3967.7, ((1, 5469.2, 683.6), (2, 9297.7, 1162.2),
    (4, 9266.7, 1158.3)),
)  # fmt: skip
WORKLOAD = Workload(consumer_rate=None, batch_size=32)


def _trial(sweep: tuple[LoaderPoint, ...] = SWEEP, **fields: Any) -> TrialResult:
    return TrialResult(
        uri="/data/big/", seconds_budget=20, seconds_used=17.5, storage=STORAGE, decode=DECODE,
        sweep=sweep, counts=summarise(sweep), requests_in_flight=32, inflight_bytes=256 * 2**20,
        setup=TrialSetup(32, None, 1, None, 2.0), **{"handover": HANDOVER, **fields},
    )  # fmt: skip


def _predicted(trial: TrialResult) -> dict[int, tuple[float, float]]:
    """Per count the trial measured: (its median, what the model predicts training sees)."""
    profile = make_profile(count=40, size=8 * MB, fmt="binary", spo=None, uri="/data/big/")
    rec = recommend(profile, make_hardware(cores=2), WORKLOAD, trial)
    table = rec.decision("num_workers").evidence["sweep_table"]
    return {int(w): (row["median"], row["predicted"]) for w, row in table.items()}


def test_fed_the_sweep_the_model_has_one_worker_slower_than_none_within_30_percent() -> None:
    rates = _predicted(_trial())
    for workers, (measured, predicted) in rates.items():
        assert abs(predicted / measured - 1) <= 0.30, (workers, measured, predicted)
    assert rates[1][1] < rates[0][1] and rates[1][0] < rates[0][0]


def _without_worker_costs(point: LoaderPoint) -> LoaderPoint:
    """`point` as a sweep records a worker slice that counted no round: no costs."""
    if point.num_workers == 0:
        return point
    return dataclasses.replace(
        point, main_cpu_s_per_sample=None, machine_cpu_s_per_sample=None,
        worker_cpu_s_per_sample=None, steady=False,
    )  # fmt: skip


def test_where_the_sweep_measured_no_worker_the_hand_over_still_slows_one() -> None:
    """Worker slices too slow to count a round record no costs: the model then has the
    decode loop and the hand-over probe for a worker. Without the probe it had the decode loop
    alone (1.7 ms a sample), and one worker read faster than none (587 against 454 samples/s,
    where the sweep measured 61 against 356); with it, a worker also pays 9.4 ms a sample to
    hand the 8 MB over, and one worker reads slower than none."""
    sweep = tuple(map(_without_worker_costs, SWEEP))
    blind = _predicted(_trial(sweep, handover=None))
    assert blind[1][1] > blind[0][1]  # the blind spot the probe closes
    rates = _predicted(_trial(sweep))
    assert rates[1][1] < rates[0][1]
    # a worker's one thread: the decode loop and the hand-over, as the probe measured them
    assert rates[1][1] == pytest.approx(1 / ((1.702 + 9.375) * MS), rel=0.05)

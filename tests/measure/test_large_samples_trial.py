"""Large samples through the trial: the hand-over probe prices a sample's bytes, and the model
fed a real trial of large local objects has one worker slower than none, as the trial measures.

A worker hands each batch to the training process through fresh shared memory, every byte of
it; the training process with 0 workers never does. For 8 MB tensors that costs a worker more
than their decode (tests/decide/test_large_samples.py holds a recorded trial).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import read_paths, recommend
from advisor.measure.hardware import probe_hardware
from advisor.measure.profile import profile_dataset
from advisor.measure.trial.data import TrialClock
from advisor.measure.trial.probes import measure_handover
from advisor.measure.trial.run import run_trial
from native_loader import S3Reader

MB = 10**6


def _handover(sample_bytes: int) -> tuple[float, float]:
    samples = [torch.ones(sample_bytes, dtype=torch.uint8) for _ in range(8)]
    handover = measure_handover(samples, 32, TrialClock(60, threading.Event(), None), 0.5)
    assert handover is not None and handover.samples >= handover.batch_size
    assert handover.bytes_per_sample == sample_bytes
    return handover.worker_s_per_sample, handover.main_s_per_sample


@pytest.mark.timing
@pytest.mark.timeout(60)
def test_the_hand_over_probe_prices_a_samples_bytes() -> None:
    """8 MB tensors cost a worker about 8 ms each to hand over on 2 cores, 20 KB ones about 50 us:
    the cost is the bytes' (one shared block a batch, its pages faulted in as it is filled)."""
    worker_large, main_large = _handover(8 * MB)
    worker_small, main_small = _handover(20_000)
    assert worker_large > 20 * max(worker_small, 1e-5)
    assert main_large > 5 * max(main_small, 1e-5)
    clock = TrialClock(60, threading.Event(), None)
    assert measure_handover([], 32, clock, 0.5) is None


@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_trial_of_large_local_objects_has_one_worker_slower_than_none(tmp_path: Path) -> None:
    """16 local files of 8 MB, decoded to 8 MB tensors, 32 a batch: the trial measures one
    worker slower than none (a worker hands 8 MB a sample over), and the model fed what it
    measured predicts so, within 30% of the trial's medians at 0 and 1 workers (its epochs of
    16 objects each waiting the start the sweep's loop measured)."""
    body = os.urandom(8 * MB)
    for i in range(16):
        (tmp_path / f"{i:05d}.bin").write_bytes(body)
    location = DatasetLocation(str(tmp_path))
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    hardware, workload = probe_hardware(), Workload(batch_size=32)
    trial = run_trial(
        location, profile, hardware, workload, seconds=15,
        read_paths=read_paths(profile, hardware, workload),
    )  # fmt: skip
    assert trial.handover is not None and trial.decode is not None, trial.notes
    assert trial.handover.bytes_per_sample == pytest.approx(8 * MB, rel=0.01)
    assert trial.handover.worker_s_per_sample > trial.decode.cpu_s_per_sample
    # every epoch of 16 objects waits for its first: a whole 8 MB read, not a first byte
    assert (
        trial.decode.start_s is not None and trial.decode.start_s > trial.storage.first_byte_p50_s
    )
    # and the loop, whose epochs start in turn with its own work, measured what each waits
    assert trial.epoch_start_s(0) is not None and trial.epoch_start_s(1) is not None
    table = recommend(profile, hardware, workload, trial).decision("num_workers").evidence
    rows = {int(w): row for w, row in table["sweep_table"].items()}
    # what a miss needs to be told apart: each count's measured range, prediction and shares,
    # and the costs the model was fed
    said = "\n".join(
        [f"{w} workers: {_row(row)}" for w, row in sorted(rows.items())]
        + [f"sweep: {point}" for point in trial.sweep]
        + [f"decode: {trial.decode}", f"handover: {trial.handover}"]
    )
    assert {0, 1} <= set(rows), said
    assert rows[1]["median"] < rows[0]["median"], said  # what the loop measured here
    assert rows[1]["predicted"] < rows[0]["predicted"], said
    for workers in (0, 1):
        assert abs(rows[workers]["error"]) <= 0.30, said


def _row(row: dict[str, object]) -> str:
    keys = ("median", "low", "high", "predicted", "error", "training_share")
    return ", ".join(f"{key} {row[key]}" for key in (*keys, "predicted_training_share"))

"""The trial in a small /dev/shm (Docker's default 64 MB): a worker count whose batches it
cannot hold is not measured, the others are, and one line says why, in the trial's notes and in
the recommendation (SHM-1). It ended in the feeder threads' tracebacks and "the trial did not
end within its budget ... (a DataLoader worker's transform that never returns?)".
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

import pytest

import native_loader.shm as shm
from advisor.measure.hardware import HardwareProfile
from advisor.measure.trial.counts import _within_shm
from advisor.measure.trial.data import TrialData
from advisor.measure.trial.probe_results import DecodeCost
from advisor.measure.trial.sweep import measure_counts
from native_loader import ObjectInfo, ReaderConfig
from native_loader.decoders import decode_raw
from testing.small_shm import run_in_small_shm, unavailable

MIB = 2**20


def _objects(folder: Path, count: int, size: int) -> tuple[ObjectInfo, ...]:
    folder.mkdir(exist_ok=True)
    found = []
    for i in range(count):
        path = folder / f"{i:03d}.bin"
        path.write_bytes(os.urandom(size))  # binary: one byte repeated sniffs as text
        found.append(ObjectInfo(str(path), path.name, size, ""))
    return tuple(found)


def test_a_count_whose_batches_shm_cannot_hold_is_not_measured_the_others_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/dev/shm as the loaders find it: 64 MiB free (their forked workers see it too). Batches
    of 16 x 4 MiB: num_workers=2 is refused at its first batch; 0 is measured."""
    monkeypatch.setattr(shm.ShmRoom, "now", classmethod(lambda cls, path="": cls(64 * MIB)))
    data = TrialData(_objects(tmp_path / "data", 4, 4 * MIB), ReaderConfig(), "bin", decode_raw)
    refused: list[tuple[int, str]] = []
    points, counts = measure_counts(
        data, 16, [0, 2], None, slice_seconds=0.3, max_slice_seconds=1.0, slices_per_mode=1,
        on_refused=lambda w, why: refused.append((w, why)),
    )  # fmt: skip
    assert [c.num_workers for c in counts] == [0] and {p.num_workers for p in points} == {0}
    assert refused == [
        (
            2,
            "/dev/shm has 64 MiB free; 2 workers x 2 batches of 64.0 MiB need 256 MiB: give the "
            "container more (docker run --shm-size=1g, Kubernetes: an emptyDir with medium "
            "Memory), or lower prefetch_factor/num_workers/batch_size",
        )
    ]


def test_the_sweep_reads_with_the_prefetch_that_fits_its_shm() -> None:
    """Each count reads with the prefetch the advice would export: PF-2's, lowered to what
    half of /dev/shm's free bytes hold (at least 1)."""
    decode = DecodeCost("default", 10, 0.001, 4 * MIB, output_bytes_per_sample=2 * MIB)
    roomy = HardwareProfile(shm_bytes=2**34, shm_free_bytes=2**34)
    small = dataclasses.replace(roomy, shm_free_bytes=64 * MIB)
    # batches of 4 x 2 MiB: 2 workers x 4 need 64 MiB, half of the 64 MiB free holds 2 each
    assert _within_shm(4, 2, roomy, decode, 4) == 4
    assert _within_shm(4, 2, small, decode, 4) == 2
    assert _within_shm(4, 2, small, decode, 64) == 1  # none fits: the loader says so
    assert _within_shm(4, 2, dataclasses.replace(small, shm_free_bytes=None), decode, 64) == 4


@pytest.mark.slow
@pytest.mark.skipif(unavailable() is not None, reason=f"no small /dev/shm: {unavailable()}")
def test_recommend_in_dockers_default_shm_says_so(tmp_path: Path) -> None:
    """The issue's `recommend`: batches of 16 x 4 MiB on 2 cores, in a 64 MiB /dev/shm."""
    _objects(tmp_path / "data", 24, 4 * MIB)
    command = [
        sys.executable, "-m", "advisor", "recommend", str(tmp_path / "data"),
        "--batch-size", "16", "--seconds", "8",
    ]  # fmt: skip
    env = {**os.environ, "HOME": str(tmp_path)}
    done = run_in_small_shm(command, timeout=100, env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "Traceback" not in out and "never returns" not in out
    assert "/dev/shm    64 MiB (64 MiB free)" in done.stdout
    # the trial's note and the recommendation's, each one line (the counts: this machine's
    # cores'; the sweep's prefetch: 1, none fitting; its first batch: of the objects a worker
    # is dealt, 12 of the 24 with 2 workers)
    assert re.search(
        r"\nnote: num_workers [\d, ]+ not measured: /dev/shm has 64 MiB free; \d+ workers? x 1 "
        r"batch of [\d.]+ MiB need \d+ MiB: give the container more \(docker run --shm-size=1g, "
        r"Kubernetes: an emptyDir with medium Memory\), or lower prefetch_factor/num_workers/"
        r"batch_size\n",
        done.stdout,
    ), done.stdout
    assert re.search(
        r"\nnote: /dev/shm has 64 MiB free: the trial could not measure num_workers [\d, ]+, "
        r"whose batches of 64 MiB it cannot hold. To load with workers, give the container 1 GiB "
        r"of shared memory \(docker run --shm-size=1g; Kubernetes: an emptyDir with medium "
        r"Memory\), or lower batch_size.\n",
        done.stdout,
    ), done.stdout
    assert done.left == []

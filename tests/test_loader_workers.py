"""The factory's DataLoader workers: what they inherit from the training process is frozen
before they read (`native_loader.loader.FreezeInherited`), and the caller's worker_init_fn
still runs."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from native_loader.loader import LoaderSettings, make_dataloader, make_dataset

INIT_MARK = "NL_TEST_WORKER_INIT"


def frozen_in_this_process(data: memoryview) -> tuple[int, str]:
    """A transform that reports the worker's permanent generation and the init's mark."""
    return gc.get_freeze_count(), os.environ.get(INIT_MARK, "")


def mark_worker(worker_id: int) -> None:
    os.environ[INIT_MARK] = f"worker {worker_id}"


def test_workers_freeze_what_they_inherit_and_run_the_callers_init(tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / f"{i}.bin").write_bytes(bytes([i]) * 100)
    inherited = len(gc.get_objects())  # torch and the test run: far more than a worker makes
    dataset = make_dataset(f"{tmp_path}/", transform=frozen_in_this_process, shuffle=False)
    loader = make_dataloader(
        dataset, LoaderSettings(batch_size=2, num_workers=2), worker_init_fn=mark_worker
    )
    seen = [sample for batch in loader for sample in batch]
    assert len(seen) == 8
    for frozen, mark in seen:
        assert frozen >= inherited // 2, (frozen, inherited)
        assert mark.startswith("worker ")
    assert {mark for _, mark in seen} == {"worker 0", "worker 1"}
    assert gc.get_freeze_count() == 0  # the training process itself is left as it was


def test_no_workers_no_freeze(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x")
    dataset = make_dataset(f"{tmp_path}/", transform=frozen_in_this_process)
    loader = make_dataloader(dataset, LoaderSettings(batch_size=1, num_workers=0))
    assert [frozen for batch in loader for frozen, _ in batch] == [0]
    assert loader.worker_init_fn is None

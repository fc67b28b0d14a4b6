"""The factory's DataLoader workers: what they inherit from the training process is frozen
before they read (`native_loader.loader.FreezeInherited`), the caller's worker_init_fn still
runs, and their batches cross to the training process whole (`native_loader.batch`)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from native_loader.loader import PIPE_BYTES, LoaderSettings, make_dataloader, make_dataset

INIT_MARK = "NL_TEST_WORKER_INIT"
PIPE_MAX = "/proc/sys/fs/pipe-max-size"


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


def varied_samples(data: memoryview) -> tuple[Any, ...]:
    """Samples of differing shapes and dtypes, nested as transforms return them."""
    n = bytes(memoryview(data))[0]
    image = torch.arange(3 * (n + 2) * 5, dtype=torch.uint8).reshape(3, n + 2, 5).permute(1, 2, 0)
    return (image, {"mask": torch.full((n + 1,), float(n)), "label": int(n)}, f"name-{n}")


def test_a_batch_crosses_from_workers_as_it_was_made(tmp_path: Path) -> None:
    """A batch from a worker carries every sample's values, shapes, dtypes and nesting; its
    tensors arrive as views into one shared block per dtype (one segment each, not one per
    tensor)."""
    for i in range(16):  # 8 per worker: whole batches of 4
        (tmp_path / f"{i:02d}.bin").write_bytes(bytes([i]) * 10)
    dataset = make_dataset(f"{tmp_path}/", transform=varied_samples, shuffle=False)
    loader = make_dataloader(dataset, LoaderSettings(batch_size=4, num_workers=2))
    batches = list(loader)
    samples = [sample for batch in batches for sample in batch]
    assert sorted(s[1]["label"] for s in samples) == list(range(16))
    for image, extra, name in samples:
        n = extra["label"]
        expected = varied_samples(memoryview(bytes([n])))
        assert torch.equal(image, expected[0]) and image.dtype == torch.uint8
        assert torch.equal(extra["mask"], expected[1]["mask"])
        assert name == f"name-{n}"
    for batch in batches:
        assert isinstance(batch, list) and len(batch) == 4
        images = {s[0].untyped_storage().data_ptr() for s in batch}
        masks = {s[1]["mask"].untyped_storage().data_ptr() for s in batch}
        assert len(images) == 1 and len(masks) == 1  # one block per dtype


def test_a_batch_pickled_in_process_keeps_what_cannot_be_packed() -> None:
    """A tensor that needs its own pickling (it requires grad) travels as it is."""
    from native_loader.batch import SampleList

    weights = torch.ones(3, requires_grad=True)
    batch = SampleList([torch.zeros(2), weights, torch.ones(2, 2)])
    back = pickle.loads(pickle.dumps(batch))
    assert isinstance(back, SampleList)
    assert torch.equal(back[0], torch.zeros(2)) and torch.equal(back[2], torch.ones(2, 2))
    assert back[1].requires_grad and torch.equal(back[1].detach(), weights.detach())


def text_line(data: memoryview) -> str:
    """A sample the size of a line of text: a batch of them is not a tensor, and 10 KB."""
    n = bytes(memoryview(data))[0]
    return f"{n:04d} " + "x" * 1200


def _result_pipe_bytes(loader: Any) -> int:
    import fcntl

    iterator = loader._get_iterator()
    try:
        reader = iterator._worker_result_queue._reader
        return int(fcntl.fcntl(reader.fileno(), fcntl.F_GETPIPE_SZ))
    finally:
        iterator._shutdown_workers()


@pytest.mark.skipif(not os.path.exists(PIPE_MAX), reason="pipe sizes are Linux's")
def test_batches_that_are_not_tensors_cross_through_a_wide_pipe(tmp_path: Path) -> None:
    for i in range(16):
        (tmp_path / f"{i:02d}.bin").write_bytes(bytes([i]))
    dataset = make_dataset(f"{tmp_path}/", transform=text_line, shuffle=False)
    loader = make_dataloader(dataset, LoaderSettings(batch_size=8, num_workers=2))
    lines = sorted(line for batch in loader for line in batch)
    assert lines == [text_line(memoryview(bytes([i]))) for i in range(16)]
    with open(PIPE_MAX) as f:
        allowed = int(f.read()) >= PIPE_BYTES or os.geteuid() == 0
    assert _result_pipe_bytes(loader) == (PIPE_BYTES if allowed else 2**16)


def test_building_a_loader_leaves_the_start_method_unset(tmp_path: Path) -> None:
    """A user may still call multiprocessing.set_start_method after building the loader."""
    code = (
        "import multiprocessing, sys\n"
        "from native_loader.loader import LoaderSettings, make_dataloader, make_dataset\n"
        f"dataset = make_dataset({str(tmp_path)!r} + '/')\n"
        "make_dataloader(dataset, LoaderSettings(batch_size=1, num_workers=1))\n"
        "assert multiprocessing.get_start_method(allow_none=True) is None\n"
        "multiprocessing.set_start_method('spawn')\n"
    )
    (tmp_path / "a.bin").write_bytes(b"x")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_callers_multiprocessing_context_wins(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x")
    dataset = make_dataset(f"{tmp_path}/")
    mine = multiprocessing.get_context("spawn")
    settings = LoaderSettings(batch_size=1, num_workers=1)
    assert (
        make_dataloader(dataset, settings, multiprocessing_context=mine).multiprocessing_context
        is mine
    )
    default = make_dataloader(dataset, settings).multiprocessing_context
    assert isinstance(default, type(multiprocessing.get_context()))  # the same start method
    # a start method by name (the advisor's trial asks for "fork"): that method, wide pipes
    named = make_dataloader(dataset, settings, multiprocessing_context="spawn")
    assert isinstance(named.multiprocessing_context, type(mine))
    assert type(named.multiprocessing_context).Queue is not type(mine).Queue

"""What a batch costs to cross from a DataLoader worker to the training process, measured here.

A worker pickles each tensor of a batch with torch's reductions: its storage goes to shared
memory and its handle (a file descriptor, under the default sharing strategy) is registered to
be sent; the training process takes the batch from the worker's queue and unpickles it, asking
the worker's process for each descriptor in turn. Both costs grow with the tensors a batch
holds, not with their bytes (the collate of a worker already builds its tensors in shared
memory). `measure_handover` times both for a batch of `tensors` one-element tensors: `send_s`,
the pickling, in this process; `take_s`, the wait for a batch a DataLoader worker of this
process already holds ready, which is the training thread's whole cost of a batch beyond its
step (the queue, the unpickling, the worker's answers), where a worker can be started here, and
the unpickling in this process otherwise.
"""

from __future__ import annotations

import math
import pickle
import time
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing  # registers torch's reductions with ForkingPickler

ROUNDS = 3  # the fastest of a few round trips: the first pays for the sharing thread's start
TIMEOUT_S = 10.0  # for the measuring worker's batches
READY_PAUSE_S = 0.01  # before asking the measuring worker for a batch: it has it ready


@dataclass(frozen=True)
class Handover:
    """Seconds per batch of `tensors` tensors: a worker's pickling of it (`send_s`) and the
    training thread's wait for it once it is ready in a worker (`take_s`)."""

    tensors: int
    send_s: float
    take_s: float


def measure_handover(tensors: int, rounds: int = ROUNDS) -> Handover | None:
    """The hand-over of a batch of `tensors` tensors, the fastest of `rounds` each way; None
    for a batch with none (nothing crosses in shared memory)."""
    if tensors < 1:
        return None
    send = take = float("inf")
    for _ in range(rounds):
        batch = [torch.zeros(1).share_memory_() for _ in range(tensors)]
        started = time.perf_counter()
        data = ForkingPickler.dumps(batch)
        sent = time.perf_counter()
        taken = pickle.loads(data)
        done = time.perf_counter()
        send, take = min(send, sent - started), min(take, done - sent)
        del batch, taken
    return Handover(tensors, send, _taken_from_a_worker(tensors, rounds) or take)


class _Ready(torch.utils.data.Dataset[list[torch.Tensor]]):
    """Batches of `tensors` one-element tensors, made at once."""

    def __init__(self, tensors: int) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return 1_000

    def __getitem__(self, index: int) -> list[torch.Tensor]:
        return [torch.zeros(1) for _ in range(self.tensors)]


def _taken_from_a_worker(tensors: int, rounds: int) -> float | None:
    """The fastest wait, of `rounds`, for a batch that a DataLoader worker already holds ready
    (each asked for after a pause that lets the worker make it); None where no worker starts."""
    loader = torch.utils.data.DataLoader(
        _Ready(tensors), batch_size=None, num_workers=1, timeout=TIMEOUT_S
    )
    fastest = math.inf
    try:
        batches = iter(loader)
        next(batches)  # the worker is up
        for _ in range(rounds):
            time.sleep(READY_PAUSE_S)
            started = time.perf_counter()
            next(batches)
            fastest = min(fastest, time.perf_counter() - started)
        del batches  # the worker is shut down with its iterator
    except (OSError, RuntimeError):
        return None
    return fastest

"""What a batch costs to cross from a DataLoader worker to the training process, measured here.

A worker pickles each tensor of a batch with torch's reductions: its storage goes to shared
memory and its handle (a file descriptor, under the default sharing strategy) is registered to
be sent; the training process unpickles it, asking the worker for each descriptor in turn. Both
costs grow with the tensors a batch holds, not with their bytes (the collate of a worker already
builds its tensors in shared memory). `measure_handover` times that round trip in this process,
with the process's own sharing strategy, for a batch of `tensors` one-element tensors already in
shared memory: its `send_s` stands for a worker's side, its `take_s` for the training thread's.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing  # registers torch's reductions with ForkingPickler

ROUNDS = 3  # the fastest of a few round trips: the first pays for the sharing thread's start


@dataclass(frozen=True)
class Handover:
    """Seconds per batch: a worker's pickling of it (`send_s`) and the training thread's
    unpickling (`take_s`), for a batch of `tensors` tensors."""

    tensors: int
    send_s: float
    take_s: float


def measure_handover(tensors: int, rounds: int = ROUNDS) -> Handover | None:
    """The round trip of a batch of `tensors` tensors, the fastest of `rounds`; None for a
    batch with none (nothing crosses in shared memory)."""
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
    return Handover(tensors, send, take)

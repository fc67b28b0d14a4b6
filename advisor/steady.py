"""The pieces of one loader measurement: its steady-state window, and the loader's processes."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class SteadyWindow:
    """The steady-state window of one loader measurement, kept on batch arrival times.

    It opens on the first batch to arrive a third of what is left of the slice (`seconds`) past
    the first batch, at least a sixth of the slice, and not before the `warm_batches` that could
    be finished and waiting then (the DataLoader's prefetch), and the `backlog_batches` the
    readers could hold fetched ahead, have arrived. Those were made while the first batch was on
    its way; they arrive back to back, and would count as if made in the window. The readers'
    backlog is the larger (8 workers reading 1 MB objects hold ~268 each in 256 MiB budgets): a
    window opened before it drained read about twice the long-run rate in short slices.

    It counts whole rounds of `round_batches` (the loader's processes): the DataLoader hands
    batches out in order, one from each worker in turn, so a window from one batch to a later
    batch of the same worker holds as many batches of every worker. Workers started together
    deliver in bursts (8 workers, 8 ms of CPU per sample: several batches a few ms apart, then
    up to 0.6 s of nothing), and a window with one end on an arrival and the other at a time counts
    a burst more or less by where it falls; whole rounds count every burst whole, which about
    halves the scatter around the long-run rate.

    It closes on the first round's end at or after the end of the slice, or a third of the
    slice after it opens if that is later. Both ends follow a time, not a batch count: batches
    also come in bursts when a stalled request holds up everything behind it, and a window that
    closed on the batch that met its count could lie within a burst and leave out the gaps
    around it (such a window can read several times the long-run rate). A window that holds
    fewer than twice the waiting batches (at least 3), or fewer than `min_samples`, is extended a
    third of the slice at a time, up to `hard_stop` seconds after the start.
    """

    started: float  # time.monotonic() when the loader was started
    seconds: float
    warm_batches: int
    min_samples: int
    hard_stop: float
    backlog_batches: int = 0
    round_batches: int = 1
    planned_open: float = math.inf  # set by the first batch
    opens: float | None = None  # the arrival time of the batch it opens on (not counted)
    opening_index: int = 0
    closes: float = math.inf
    closed: bool = False  # a round ended at or after `closes`
    batches: int = 0  # counted: whole rounds after the opening batch
    samples: int = 0
    last_counted_at: float = 0.0  # the last counted round's end
    round_samples: int = 0  # arrived in the round under way, not counted yet

    @property
    def enough(self) -> bool:
        return self.batches >= max(3, 2 * self.warm_batches) and self.samples >= self.min_samples

    def arrival(self, index: int, now: float, samples: int) -> bool:
        """Batch `index` of `samples` arrived at `now`; True if it ended a counted round."""
        if self.opens is None:
            if index == 0:
                left = max(self.seconds - (now - self.started), self.seconds / 2)
                self.planned_open = now + left / 3
            waited = index >= self.warm_batches + self.backlog_batches - 1
            if waited and now >= self.planned_open:
                self.opens, self.opening_index = now, index
                self.closes = max(self.started + self.seconds, now + self.seconds / 3)
            return False
        if self.closed:
            return False
        self.round_samples += samples
        if (index - self.opening_index) % self.round_batches:
            return False
        self.batches += self.round_batches
        self.samples += self.round_samples
        self.round_samples = 0
        self.last_counted_at = now
        step, limit = self.seconds / 3, self.started + self.hard_stop
        while now >= self.closes and not self.enough and self.closes + step <= limit:
            self.closes += step
        self.closed = now >= self.closes
        return True

    def rate(self) -> float | None:
        """Samples per second within the window; None if it never held enough."""
        if self.opens is None or not self.enough or self.last_counted_at <= self.opens:
            return None
        return self.samples / (self.last_counted_at - self.opens)


def tensor_bytes(sample: Any) -> int:
    if isinstance(sample, torch.Tensor):
        return sample.numel() * sample.element_size()
    if isinstance(sample, dict):
        return sum(tensor_bytes(v) for v in sample.values())
    return 0


def child_pids() -> set[int]:
    """PIDs of this process's children (all threads' children, as DataLoader forks from one)."""
    pids: set[int] = set()
    pid = os.getpid()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids.update(int(child) for child in f.read().split())
        except OSError:
            continue
    return pids


def largest_rss_mb(pids: set[int]) -> float:
    """Largest resident set (MB) among `pids`; processes that are gone count as 0."""
    largest = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        largest = max(largest, int(line.split()[1]))
        except OSError:
            continue
    return largest / 1024

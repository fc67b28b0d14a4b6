"""The pieces of one loader measurement: its steady-state window, and the loader's processes."""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class SteadyWindow:
    """The steady-state window of one loader measurement, kept on batch arrival times.

    It opens on the first batch to arrive a third of what is left of the slice (`seconds`) past
    the first batch, at least a sixth of the slice, and not before the `warm_batches` that could
    be finished and waiting then (the DataLoader's prefetch) have arrived: they were made while
    the first batch was on its way, arrive back to back, and would count as if made in the
    window.

    A loader is a chain with a buffer between its stages: its processes make batches into the
    DataLoader's prefetch queue, the training loop takes them from it. A loader that sat idle
    between slices has the queue full, and a loop that takes batches faster than they are made
    drains it, faster than the long-run rate, for a time no batch count predicts (a loader just
    short of its consumer drains it at the consumer's pace for the whole slice). So the window
    does not wait for it: each arrival brings how many samples the processes have produced so
    far (`produced`), and the rate is the lower of the delivered and produced rates over the
    window. The bottleneck runs at the long-run rate; the loop downstream of it runs at it plus
    what it drains.

    The readers are no stage of their own here: what a reader reserves (requests in flight and
    results not yet taken) stays level while it has anything left to request, since each part
    or object taken is replaced at once (`PartPipeline._fill`, `S3Reader.read_many`), and
    shrinks only once it has requested the last of its epoch. So "produced + the growth of the
    reservations" was a rate of requests, below the produced rate only where nothing was left
    to fetch (issue 56: streamed shards whose epoch the read-ahead held whole read 74-106
    samples/s where a training loop read 309). A reader that cannot keep up makes the processes
    wait, which the produced rate shows; what it fetched ahead while the loader sat idle, and
    the processes drain at a slice's start, its reservations never showed either (they stay
    level while it drains).

    It counts whole rounds of `round_batches` (the loader's processes): the DataLoader hands
    batches out in order, one from each worker in turn, so a window from one batch to a later
    batch of the same worker holds as many batches of every worker. Workers started together
    deliver in bursts (8 workers, 8 ms of CPU per sample: several batches a few ms apart, then
    up to 0.6 s of nothing), and a window with one end on an arrival and the other at a time counts
    a burst more or less by where it falls; whole rounds count every burst whole, which about
    halves the scatter around the long-run rate.

    A loader finishing an epoch (what is left of it no more than the prefetch queue and the
    batches its processes are filling) drains the queue with nothing left to make until the next
    epoch starts, and then refills it from empty. A window that holds an epoch's end counts the
    delivered rate alone: the produced one would read the drain, or a refill not yet done at its
    close, as a slow stage, while the delivered one holds the drain and the restart's wait alike.

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
    delivered: int = 0  # samples arrived since the start
    # samples the processes had produced as it opened, and at the last counted round's end
    produced_at_open: float = 0.0
    produced_at_last: float = 0.0
    held_epoch_end: bool = False  # the loader finished an epoch within the window

    @property
    def enough(self) -> bool:
        return self.batches >= max(3, 2 * self.warm_batches) and self.samples >= self.min_samples

    def arrival(
        self,
        index: int,
        now: float,
        samples: int,
        produced: float | None = None,
        finishing: bool = False,
    ) -> bool:
        """Batch `index` of `samples` arrived at `now`, when the loader's processes had produced
        `produced` samples in all (None: count what arrives), `finishing` an epoch or not; True
        if it ended a counted round."""
        self.delivered += samples
        made = self.delivered if produced is None else produced
        if self.opens is None:
            if index == 0:
                left = max(self.seconds - (now - self.started), self.seconds / 2)
                self.planned_open = now + left / 3
            if index >= self.warm_batches - 1 and now >= self.planned_open:
                self.opens, self.opening_index = now, index
                self.produced_at_open = made
                self.closes = max(self.started + self.seconds, now + self.seconds / 3)
            return False
        if self.closed:
            return False
        self.held_epoch_end = self.held_epoch_end or finishing
        self.round_samples += samples
        if (index - self.opening_index) % self.round_batches:
            return False
        self.batches += self.round_batches
        self.samples += self.round_samples
        self.round_samples = 0
        self.last_counted_at = now
        self.produced_at_last = made
        step, limit = self.seconds / 3, self.started + self.hard_stop
        while now >= self.closes and not self.enough and self.closes + step <= limit:
            self.closes += step
        self.closed = now >= self.closes
        return True

    def rate(self) -> float | None:
        """Samples per second within the window: the lower of the delivered and produced rates
        (the delivered one where it held an epoch's end); None if it never held enough."""
        if self.opens is None or not self.enough or self.last_counted_at <= self.opens:
            return None
        produced = self.produced_at_last - self.produced_at_open
        lowest = self.samples if self.held_epoch_end else min(self.samples, produced)
        return max(lowest, 0.0) / (self.last_counted_at - self.opens)


class StageGauge:
    """How many items the processes of one DataLoader have produced (`SteadyWindow`'s produced
    stage), and how long their epochs' first items kept them waiting. Each loader process (a
    worker, or the main process with 0 workers) counts in slots of its own, in memory shared
    across the fork.
    """

    def __init__(self, processes: int) -> None:
        context = multiprocessing.get_context("fork")
        self._slots = context.RawArray("d", processes)
        self._starts = context.RawArray("d", processes)
        self._start_waits = context.RawArray("d", processes)

    def publishing(self, dataset: Any) -> PublishingDataset:
        """`dataset` counting into this gauge as it is iterated."""
        return PublishingDataset(dataset, self._slots, self._starts, self._start_waits)

    def read(self) -> float:
        """Items the processes have produced in all (0 before any)."""
        return float(sum(self._slots))

    def epoch_starts(self) -> EpochStarts:
        """The epochs the processes have started so far, and their first items' waits."""
        return EpochStarts(sum(self._starts), sum(self._start_waits))


@dataclass(frozen=True)
class EpochStarts:
    """Epoch starts a loader's processes saw (one per process per epoch) and the seconds they
    waited for those epochs' first items beyond their own CPU (the reader's start and its first
    reads, begun at once; the first item's transform is CPU, counted with every item's)."""

    count: float = 0.0
    wait_s: float = 0.0

    def mean_since(self, earlier: EpochStarts) -> float | None:
        """The mean wait of the starts since `earlier`; None: none."""
        count = self.count - earlier.count
        return max(self.wait_s - earlier.wait_s, 0.0) / count if count >= 1 else None


class PublishingDataset(torch.utils.data.IterableDataset[Any]):
    """An S3IterableDataset that counts the items it yields into its process's slot, and its
    first item's wait (`StageGauge`)."""

    def __init__(self, dataset: Any, slots: Any, starts: Any, start_waits: Any) -> None:
        self.dataset = dataset
        self._slots = slots
        self._starts = starts
        self._start_waits = start_waits

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        slot = info.id if info is not None else 0
        slots = self._slots
        items: Iterable[Any] = self.dataset
        begun, cpu = time.perf_counter(), time.thread_time()
        first = True
        for item in items:
            if first:
                # this thread's wall less its CPU: what it waited for (the reads, the cores)
                waited = (time.perf_counter() - begun) - (time.thread_time() - cpu)
                self._start_waits[slot] += max(waited, 0.0)
                self._starts[slot] += 1  # after the wait: a reader never sees a start without it
                first = False
            slots[slot] += 1
            yield item


def tensor_bytes(sample: Any) -> int:
    """Bytes a transformed sample holds: its tensors', a record's text (characters, a close
    enough count that costs no encoding), 0 for anything else."""
    if isinstance(sample, torch.Tensor):
        return sample.numel() * sample.element_size()
    if isinstance(sample, (str, bytes)):
        return len(sample)
    if isinstance(sample, dict):
        return sum(tensor_bytes(v) for v in sample.values())
    return 0

"""What users trip over in their own training loop, found for them (`advisor.watch`): the
batch's shape at the worker boundary, /dev/shm and the open-file limit against what is in
flight, fewer shards than workers, workers started anew every epoch, a dip at every epoch's
start, and a loop that slows as it runs. Each is named with what was measured of it."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

from advisor.core.units import binary_size, counted, duration, rate, share
from advisor.measure.loop.results import LoopRun, LoopSummary
from advisor.measure.loop.watch import LoaderFacts

# A worker hands each tensor of a batch over in its own shared-memory segment and file
# descriptor: lists of 32 decoded images crossed at about a third of the rate of the same images
# stacked (`python -m bench handover`); 114 tensors packed into 9 gave 1.25-1.67x and ended a
# file-descriptor crash at 16 workers (roboflow/rf-detr PR 1399).
BOUNDARY_TENSORS = 32
SHM_WARN = 0.5  # in-flight batches over this share of /dev/shm's free bytes: close to the crash
FILES_WARN = 0.5  # descriptors in flight over this share of the open-file limit
RESTART_SHARE = 0.05  # a first-batch stall over this share of the epoch is worth naming
DRIFT = 0.2  # the last window this much slower than the first, and every window slower


@dataclass(frozen=True)
class Trip:
    """Something users trip over, found for them: `cause` names it, `line` says it."""

    cause: str  # "boundary", "shm", "open-files", "shards", "restart", "epoch-start", "drift"
    line: str


def find_trips(summary: LoopSummary, run: LoopRun, facts: LoaderFacts | None) -> list[Trip]:
    """What the loader's settings, its first batch, the machine and the loop say it trips over."""
    found: list[Trip] = []
    if facts is not None and facts.num_workers:
        found += _boundary(facts)
        starts = [firsts[0] for firsts in run.epoch_start_waits(1)]
        if not facts.persistent_workers and run.wait_s and summary.seconds > 0:
            stalled = sum(starts) / summary.seconds
            if stalled > RESTART_SHARE:
                first = (
                    f"each epoch's first batch came after {duration(statistics.median(starts))}"
                    f" (median of {len(starts)})"
                    if len(starts) > 1
                    else f"the first batch came after {duration(starts[0])}"
                )
                found.append(
                    Trip(
                        "restart",
                        f"the workers start anew every epoch (persistent_workers=False): "
                        f"{first}, {share(stalled)} of the time; persistent_workers=True "
                        "keeps them",
                    )
                )
    if facts is not None and facts.shards is not None and (facts.num_workers or 0) > facts.shards:
        idle = (facts.num_workers or 0) - facts.shards
        found.append(
            Trip(
                "shards",
                f"the data set has {counted(facts.shards, 'shard')} for "
                f"{counted(facts.num_workers or 0, 'worker')}: {counted(idle, 'worker')} get no "
                "data; give it at least as many shards as workers (times ranks)",
            )
        )
    restarting = facts is not None and bool(facts.num_workers) and not facts.persistent_workers
    if run.epoch_starts and not restarting:
        found += _epoch_dips(run)
    rates = [s / (w + t) for w, t, s in run.windows() if w + t > 0]
    slowing = len(rates) >= 3 and all(b < a for a, b in itertools.pairwise(rates))
    if slowing and rates[-1] < rates[0] * (1 - DRIFT):
        found.append(
            Trip(
                "drift",
                f"slower as it runs: {rate(rates[0])} in the first window, "
                f"{rate(rates[-1])} in the last",
            )
        )
    return found


def _epoch_dips(run: LoopRun) -> list[Trip]:
    """A dip at every epoch's start (workers kept, or none): its first batch waits beyond the
    loop's median wait, as the loader begins the epoch with nothing in flight."""
    starts = [run.wait_s[i] for i in run.epoch_starts]
    typical = statistics.median(run.wait_s)
    looped = sum(run.wait_s) + sum(run.step_s)
    dipped = sum(max(start - typical, 0.0) for start in starts)
    if looped <= 0 or dipped / looped <= RESTART_SHARE:
        return []
    return [
        Trip(
            "epoch-start",
            f"a dip at every epoch's start: its first batch waited "
            f"{duration(statistics.median(starts))} (median of {len(starts)} epochs) where the "
            f"others wait {duration(typical)}, {share(dipped / looped)} of the time: the "
            "loader begins each epoch with nothing in flight (longer epochs spread it thinner)",
        )
    ]


def _boundary(facts: LoaderFacts) -> list[Trip]:
    workers = facts.num_workers or 0
    prefetch = facts.prefetch_factor or 2
    in_flight = workers * prefetch
    found = []
    if facts.tensors_per_batch > BOUNDARY_TENSORS:
        found.append(
            Trip(
                "boundary",
                f"each batch crosses from a worker as {facts.tensors_per_batch} tensors "
                f"({binary_size(facts.batch_bytes)}), each its own shared-memory segment and "
                "file descriptor: stack them, or collate into native_loader.batch.SampleList",
            )
        )
    need = in_flight * facts.batch_bytes
    if facts.shm_free_bytes is not None and need > SHM_WARN * facts.shm_free_bytes:
        found.append(
            Trip(
                "shm",
                f"{workers} workers x prefetch {prefetch} x {binary_size(facts.batch_bytes)} "
                f"a batch hold {binary_size(need)} of /dev/shm, which has "
                f"{binary_size(facts.shm_free_bytes)} free: a worker will crash with a bus "
                "error; give the container more (--shm-size) or lower prefetch_factor",
            )
        )
    files = in_flight * facts.tensors_per_batch
    if facts.open_files_limit is not None and files > FILES_WARN * facts.open_files_limit:
        found.append(
            Trip(
                "open-files",
                f"{files} tensors in flight each hold a file descriptor, against an open-file "
                f"limit of {facts.open_files_limit}: raise `ulimit -n`, or send fewer tensors",
            )
        )
    return found

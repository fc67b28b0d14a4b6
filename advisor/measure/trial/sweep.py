"""The training-loop measurement: the samples/s a training loop sees from a DataLoader.

Each candidate num_workers runs the real DataLoader (persistent workers, the reader settings the
advice exports, the user's transform) inside a loop whose step takes `batch / consumer_rate`
seconds, in the two ways a GPU step costs the host: a blocking wait (`STEP_SLEEP`) and CUDA's
default spin-wait on synchronisation, a core kept busy for the step (`STEP_SPIN`). Without a
consumer rate there is no step (`STEP_NONE`): the loader's own rate is what counts.

Counts are measured in interleaved slices (0, 1, 2, 0, 1, 2, ...; the step mode alternates from
round to round), each on a loader kept alive between its slices, each over a `SteadyWindow`,
each driving the one instrumented loop that `diagnose` and `watch` record with;
where the count search (`advisor.measure.trial.search`) adds a count, its slices follow. Every
slice measures the training thread's CPU per sample, the cores' busy CPU per sample (a spinning
step's spin left out of both) and the thread's share of a core (the spin in it).
`summarise` gives each count the lower of its step modes' medians and that mode's spread.
The trial (advisor/measure/trial/counts.py) and the bench's matrix (bench/advisor_matrix.py) both
measure here.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence

from advisor.measure.hardware.host import child_pids
from advisor.measure.hardware.local_server import ServingScan
from advisor.measure.hardware.processes import TreeMeter
from advisor.measure.loop.instrument import InstrumentedLoop, Mark
from advisor.measure.trial.data import TrialData
from advisor.measure.trial.live import BATCH_TIMEOUT_S, LiveLoader, spin_step
from advisor.measure.trial.results import (
    STEP_NONE,
    STEP_SLEEP,
    STEP_SPIN,
    CountRate,
    LoaderPoint,
    summarise,
)
from advisor.measure.trial.search import CountSearch
from advisor.measure.trial.steady import EpochStarts, SteadyWindow, tensor_bytes
from native_loader.shm_plan import ShmTooSmallError

# A slice shorter than this rarely holds a steady window (it opens a third of the way in, past
# the batches that waited while the loader sat idle): the trial prunes counts rather than go
# below it.
MIN_SLICE_SECONDS = 1.5
SLICE_STRETCH = 1.5  # a budgeted slice may run this much over its share to reach a steady state


def measure_slice(
    live: LiveLoader,
    seconds: float,
    *,
    consumer_rate: float | None = None,
    step: str = STEP_NONE,
    check: Callable[[], None] | None = None,
    max_seconds: float | None = None,
    min_samples: int = 0,
    ignore_pids: set[int] | None = None,
    servers: ServingScan | None = None,
) -> LoaderPoint:
    """Run `live` for about `seconds` in a training loop and measure what it sees.

    After each batch the loop spends the consumer's step (`len(batch) / consumer_rate` s) as
    `step` says: asleep, or spinning (`spin_step`); no step without a consumer rate.
    The rate is the steady state over the window that `SteadyWindow` describes (the batches
    that waited while the loader sat idle are skipped). A slice too short for it is extended up
    to `max_seconds` (default three times `seconds`); failing that, the rate includes them (a
    lower bound). `check` is called after every batch (it may raise to stop early). With
    `min_samples`, the window must also hold that many samples.

    The slice is the one instrumented loop (`InstrumentedLoop`) driven from here. Its costs per
    sample are measured over the window's counted rounds even where those were too few for a
    steady rate: a slice of large samples (8 MB tensors, 32 a batch: a batch every half second
    on 2 cores) holds a round or two, and without them the model would have no worker's costs
    at all. The training thread's CPU per sample is its CPU outside the steps
    (`Mark.loader_cpu_s`: taking the batches, and the loop's own work on them, as a training
    loop has its own), and the cores' busy CPU per sample leaves the steps' CPU (a spinning
    step's spin) out too. The DataLoader workers are the process tree less `ignore_pids` (by
    default the children that predate the slice), read by the loop's `TreeMeter`: their CPU
    from the window's opening to the slice's end, over the window's samples; their memory
    (`peak_worker_rss_bytes`) the largest single worker's resident set at any of the readings.
    Under a CPU quota, a loopback endpoint's `servers` are scanned again at the first batch,
    while the loader reads (a proxy's upstream shows only then), before the window opens.
    """
    step_rate = consumer_rate if step != STEP_NONE else None
    hard_stop = max(seconds, max_seconds if max_seconds is not None else 3 * seconds)
    ignore = child_pids() if ignore_pids is None else ignore_pids
    loop = InstrumentedLoop(
        live.samples_in, meter=TreeMeter(leave_out=frozenset(ignore)), gpu=False,
        servers=servers.found if servers is not None else frozenset(),
    )  # fmt: skip
    loop.start()
    started = loop.started_at
    window = SteadyWindow(
        started, seconds, live.workers * (live.prefetch or 0), min_samples, hard_stop,
        round_batches=max(live.workers, 1),
    )  # fmt: skip
    first_batch_s = 0.0
    samples = 0
    sample_bytes = 0
    # The loop at the window's opening batch and at its last counted round's end (`Mark`): a
    # batch's loading work happens before it arrives, so the window's CPU runs from arrival to
    # arrival; the workers' CPU is read again at the slice's end.
    opened: Mark | None = None
    closed: Mark | None = None
    opened_starts = closed_starts = EpochStarts()
    for batch_index in itertools.count():
        batch = live.next_batch()
        now = loop.arrived(batch)
        if batch_index == 0:
            first_batch_s = now - started
            if servers is not None:
                loop.servers = servers.scan()
        waiting = window.opens is None
        batch_samples = live.samples_in(batch)
        produced = live.produced_samples()
        if window.arrival(batch_index, now, batch_samples, produced, live.finishing_epoch()):
            closed = loop.mark(tree=False)
            closed_starts = live.epoch_starts()
        elif waiting and window.opens is not None:
            opened = loop.mark(tree=live.workers > 0)
            opened_starts = live.epoch_starts()
        samples += batch_samples
        sample_bytes += sum(tensor_bytes(s) for s in batch)
        if check is not None:
            check()
        if window.closed or now - started >= hard_stop:
            break
        loop.stepping()
        if step_rate is not None:
            step_s = batch_samples / step_rate
            if step == STEP_SPIN:
                spin_step(step_s)
            else:
                time.sleep(step_s)
        loop.stepped()
    end = loop.mark(tree=live.workers > 0)
    loop.stop()
    elapsed = max(time.perf_counter() - started, 1e-6)
    steady_rate = window.rate()
    rate = steady_rate if steady_rate is not None else samples / elapsed
    main_cpu = machine_cpu = share = worker_cpu = served_cpu = start_wait = None
    # costs per sample need no steady rate: the rounds the window counted hold them
    if opened is not None and closed is not None and window.samples > 0:
        start_wait = closed_starts.mean_since(opened_starts)
        main_cpu = closed.loader_cpu_s(opened) / window.samples
        busy = closed.busy_cpu_s - opened.busy_cpu_s
        if busy > 0:
            machine_cpu = max(busy - closed.steps_cpu_s(opened), 0.0) / window.samples
        if loop.servers:
            served_cpu = max(closed.served_cpu_s - opened.served_cpu_s, 0.0) / window.samples
        if closed.wall_s > opened.wall_s:
            share = (closed.thread_cpu_s - opened.thread_cpu_s) / (closed.wall_s - opened.wall_s)
        if opened.tree is not None and end.tree is not None:
            own = os.getpid()
            workers = end.tree.without(own).cpu_since(opened.tree.without(own))
            worker_cpu = max(workers, 0.0) / window.samples
    bytes_per_sample = sample_bytes / samples if samples else 0.0
    return LoaderPoint(
        num_workers=live.workers,
        pin_memory=live.pin,
        prefetch_factor=live.prefetch,
        samples=samples,
        seconds=elapsed,
        samples_per_s=rate,
        mb_per_s=rate * bytes_per_sample / 1e6,
        time_to_first_batch_s=first_batch_s,
        peak_worker_rss_bytes=loop.meter.peak_child_rss_bytes,
        main_cpu_s_per_sample=main_cpu,
        machine_cpu_s_per_sample=machine_cpu,
        steady=steady_rate is not None,
        step=step if step_rate is not None else STEP_NONE,
        training_share=share,
        worker_cpu_s_per_sample=worker_cpu,
        server_cpu_s_per_sample=served_cpu,
        epoch_start_wait_s=start_wait,
    )


def measure_loader(
    data: TrialData,
    batch_size: int,
    workers: int,
    pin: bool,
    seconds: float,
    check: Callable[[], None] | None = None,
    max_seconds: float | None = None,
    min_samples: int = 0,
) -> LoaderPoint:
    """One slice of a fresh loader with no consumer (`measure_slice`), start-up included."""
    ignore = child_pids()  # e.g. a local S3 server: not a DataLoader worker
    live = LiveLoader(data, batch_size, workers, pin)
    try:
        return measure_slice(
            live, seconds, check=check, max_seconds=max_seconds, min_samples=min_samples,
            ignore_pids=ignore, servers=ServingScan(data.config.endpoint_url),
        )  # fmt: skip
    finally:
        live.close()


def _one_batch_s(points: Sequence[LoaderPoint], batch_size: int) -> float:
    """Seconds one batch took at the slowest rate measured so far (0 before any): a slice
    with less time left than that measures nothing, and holds the trial past its budget
    waiting for the batch."""
    slowest = min((p.samples_per_s for p in points if p.samples_per_s > 0), default=None)
    return 0.0 if slowest is None else batch_size / slowest


def _close_all(loaders: Mapping[int, LiveLoader]) -> None:
    for live in loaders.values():
        live.close()


def measure_counts(
    data: TrialData,
    batch_size: int,
    counts: Sequence[int] | CountSearch,
    consumer_rate: float | None,
    *,
    seconds: float | None = None,
    slice_seconds: float | None = None,
    max_slice_seconds: float | None = None,
    slices_per_mode: int = 2,
    modes: tuple[str, ...] | None = None,
    pin: bool = False,
    min_samples: int = 0,
    check: Callable[[], None] | None = None,
    on_slice: Callable[[LoaderPoint], None] | None = None,
    prefetch: Mapping[int, int] | None = None,
    batch_timeout_s: float = BATCH_TIMEOUT_S,
    ceiling: Callable[[Sequence[LoaderPoint], int], float | None] | None = None,
    on_refused: Callable[[int, str], None] | None = None,
) -> tuple[tuple[LoaderPoint, ...], tuple[CountRate, ...]]:
    """Measure `counts` in interleaved slices as training sees them: the slices and per count.
    `prefetch` gives each count's prefetch_factor (the one that would be exported for it;
    default torch's 2). `modes`: the step models (default both with a consumer rate).

    `counts` is a list, measured as one group, or a `CountSearch`: its first counts as one
    group, then one count at a time as it asks for them, given the medians so far and
    `ceiling(points, best)` (the samples/s a measured ceiling allows at the best count).
    A group is measured in rounds of one slice per count (0, 1, 2, 0, 1, 2, ...),
    `slices_per_mode` per step mode, the mode alternating from round to round. Either within
    `seconds` in all (the trial: each slice gets an even share of what is left over the slices
    the budget was planned for, and may stretch SLICE_STRETCH x that, never past the end), or
    `slice_seconds` each, stretched up to `max_slice_seconds` (the bench). A count's loader
    stays alive, its workers persistent, from its first slice to its group's last. A worker
    batch slower than `batch_timeout_s` ends the measurement (TimeoutError). A count whose
    batches /dev/shm cannot hold (`ShmTooSmallError`, at its first batch) is not measured, the
    others are: `on_refused(count, the error's line)`.
    """
    if (seconds is None) == (slice_seconds is None):
        raise ValueError("give either seconds (a budget) or slice_seconds")
    if modes is None:
        modes = (STEP_SLEEP, STEP_SPIN) if consumer_rate else (STEP_NONE,)
    search = counts if isinstance(counts, CountSearch) else None
    group = counts.first() if isinstance(counts, CountSearch) else list(counts)
    per_count = slices_per_mode * len(modes)
    # the counts the budget was planned for: the search's limit, never more than it can ask for
    planned = min(search.limit, search.cores + 1) if search is not None else len(group)
    deadline = time.monotonic() + seconds if seconds is not None else math.inf
    points: list[LoaderPoint] = []
    measured_counts: set[int] = set()
    refused: set[int] = set()  # counts whose batches /dev/shm cannot hold
    ignore = child_pids()
    servers = ServingScan(data.config.endpoint_url)  # what serves it, kept across the slices
    while group:
        order = [(w, modes[r % len(modes)]) for r in range(per_count) for w in group]
        later = per_count * max(planned - len(measured_counts) - len(group), 0)
        loaders: dict[int, LiveLoader] = {}
        # each open loader's workers, seen starting in its slices: the other counts' loaders
        # stay open between their slices, and their idle workers are not this count's memory
        owned: dict[int, set[int]] = {}
        try:
            for index, (workers, mode) in enumerate(order):
                if workers in refused:
                    continue
                left = deadline - time.monotonic()
                if slice_seconds is not None:
                    target, stop = slice_seconds, max_slice_seconds
                elif left > max(0.2, _one_batch_s(points, batch_size)):
                    target = left / (len(order) - index + later)
                    stop = min(SLICE_STRETCH * target, left)
                else:
                    break  # what is left cannot hold a batch at the slowest rate measured so far
                if workers not in loaders:
                    loaders[workers] = LiveLoader(
                        data, batch_size, workers, pin, batch_timeout_s,
                        prefetch=(prefetch or {}).get(workers),
                    )  # fmt: skip
                others = set().union(*(pids for w, pids in owned.items() if w != workers))
                before = child_pids()
                try:
                    point = measure_slice(
                        loaders[workers], target, consumer_rate=consumer_rate, step=mode,
                        check=check, max_seconds=stop, min_samples=min_samples,
                        ignore_pids=ignore | others, servers=servers,
                    )  # fmt: skip
                except ShmTooSmallError as exc:
                    refused.add(workers)
                    if on_refused is not None:
                        on_refused(workers, str(exc))
                    continue
                owned.setdefault(workers, set()).update(child_pids() - before)
                points.append(point)
                if on_slice is not None:
                    on_slice(point)
        finally:
            _close_all(loaders)
        measured_counts.update(loaders)
        group = [w for w in _next_group(search, points, ceiling) if w not in refused]
        if seconds is not None and deadline - time.monotonic() <= 0.2:
            break
    return tuple(points), summarise(points)


def _next_group(
    search: CountSearch | None,
    points: Sequence[LoaderPoint],
    ceiling: Callable[[Sequence[LoaderPoint], int], float | None] | None,
) -> list[int]:
    """The next count the search asks for (as a group of one), given the medians so far."""
    if search is None:
        return []
    rates = {c.num_workers: c.median for c in summarise(points)}
    if not rates:
        return []
    best = max(rates, key=lambda w: (rates[w], -w))
    wanted = search.next_count(rates, ceiling(points, best) if ceiling is not None else None)
    return [] if wanted is None or wanted in rates else [wanted]

"""The instrumented training loop: any iterable of batches (usually the user's own DataLoader),
a step after every batch, and the time the loop blocked waiting for each batch.

The loader is iterated in a thread of its own, but only on demand: the loop asks for the next
batch when its step is done and waits for it, exactly as `for batch in loader: step(batch)`
would, so nothing is fetched ahead that the user's loop would not fetch. The thread is there so
that a loader that never yields is reported (`LoaderHung`) after a bounded wait instead of being
waited on forever. The loop records through the one instrumented loop (`InstrumentedLoop`), as
`watch` and the trial's sweep do. After the loop, the same step is replayed on batches already
loaded: the loop's rate with loading free (the "headspace").
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from advisor.core.bounds import LoopLimits
from advisor.measure.hardware.processes import TreeMeter
from advisor.measure.loop.instrument import InstrumentedLoop, batch_samples
from advisor.measure.loop.results import LoopRun
from advisor.measure.loop.watch import LoaderFacts
from advisor.measure.trial.live import spin_step
from native_loader.worker_death import deaths_in, explain
from native_loader.worker_memory import loop_memory, oom_kills

Step = Callable[[Any], object]
# An iterable of batches, or a function that makes one (called at the start of every run, so
# that each run of a comparison starts a fresh epoch of a loader that iterates only once).
LoaderSource = Iterable[Any] | Callable[[], Iterable[Any]]
POLL_S = 0.1  # how often a wait for a batch looks at the cancel event
REPLAY_MAX_S = 10.0  # the replay's own bound, whatever the step costs


class LoaderError(Exception):
    """The loader under diagnosis failed; the message says how and at which batch."""


class LoaderEmpty(LoaderError):
    """The loader's iterator ended before its first batch."""


class LoaderFailed(LoaderError):
    """The loader raised; the user's exception is the `__cause__`."""


class LoaderHung(LoaderError, TimeoutError):
    """No batch came within the bound: the loader is reported as hung, not waited on."""


@dataclass(frozen=True)
class LoopEvent:
    """Progress of a running loop: `fraction` of its bound in [0, 1], and what it is doing."""

    label: str
    fraction: float
    message: str


@dataclass(frozen=True)
class PacedStep:
    """A step of a set time, in the two ways a GPU step costs the host: it blocks (`spins`
    False: the thread sleeps) or it spins as CUDA's default synchronisation does (`spin_step`:
    the training thread keeps its core busy). Its time per batch is `seconds`, or the batch's
    samples over `samples_per_s` (exactly one of them). A callable taking a batch, as any
    `Step`; it says its kind, so that every front models the step the same way."""

    seconds: float | None = None
    samples_per_s: float | None = None
    spins: bool = False
    samples_of: Callable[[Any], int] = batch_samples

    def __post_init__(self) -> None:
        if (self.seconds is None) == (self.samples_per_s is None):
            raise ValueError(
                f"a paced step takes seconds or samples_per_s, exactly one ({self.seconds=}, "
                f"{self.samples_per_s=})"
            )

    def __call__(self, batch: Any) -> None:
        if self.seconds is not None:
            seconds = self.seconds
        else:
            assert self.samples_per_s is not None
            seconds = self.samples_of(batch) / self.samples_per_s
        if self.spins:
            spin_step(seconds)
        else:
            time.sleep(seconds)


class _Fetcher:
    """Iterates `loader` in its own thread, one batch per request."""

    def __init__(self, loader: LoaderSource) -> None:
        self._loader = loader
        self._requests: queue.Queue[bool] = queue.Queue()
        self._results: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._waiting = False  # a batch was asked for and has not come (a hung loader)
        self._failed = False  # the loader raised
        self.made: Iterable[Any] | None = None  # what was iterated (made by a loader function)
        self._iterator: Any = None  # its iterator: a hung DataLoader's workers, a dead one's
        self._thread = threading.Thread(target=self._run, name="diagnose-loader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        iterator = None
        while self._requests.get():
            try:
                if iterator is None:
                    self.made = fresh(self._loader)
                    iterator = self._iterator = iter(self.made)
                self._results.put(("batch", next(iterator)))
            except StopIteration:
                self._results.put(("end", None))
            except BaseException as exc:  # the user's loader: anything it raises is reported
                self._failed = True
                self._results.put(("error", exc))
        del iterator  # a DataLoader's iterator shuts its workers down when it goes

    def next(self, timeout_s: float, cancel: threading.Event | None) -> tuple[str, Any]:
        self._requests.put(True)
        self._waiting = True
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                result = self._results.get(timeout=POLL_S)
                self._waiting = False
                return result
            except queue.Empty:
                if cancel is not None and cancel.is_set():
                    return "cancelled", None
                if time.monotonic() > deadline:
                    return "hung", None

    def close(self, timeout_s: float = 10.0) -> None:
        """Ends the thread, which drops the iterator (a DataLoader then stops its workers). A
        thread still inside a hung `next()` is left behind: it is a daemon, and waiting on it is
        what the bound is there to avoid; a DataLoader's workers it would hold are stopped
        here, so that a notebook does not keep them for its whole life. So are those of a
        loader that raised: its error's traceback holds the iterator, and a notebook keeps the
        last error."""
        self._requests.put(False)
        if not self._waiting:
            self._thread.join(timeout=timeout_s)
            if not self._failed:
                return
        shutdown = getattr(self._iterator, "_shutdown_workers", None)
        if callable(shutdown):
            with contextlib.suppress(Exception):  # the loader is broken already; it is reported
                shutdown()


def loader_words(label: str) -> str:
    """A loop's label as the subject of a sentence: "your loader", "the recommended loader"."""
    if label.startswith(("your ", "the ")) or label.endswith("loader"):
        return label
    return f"the {label} loader"


def fresh(loader: LoaderSource) -> Iterable[Any]:
    """The iterable itself, or a new one from a function that makes one."""
    if callable(loader) and not isinstance(loader, Iterable):
        made = loader()
        if not isinstance(made, Iterable):
            raise TypeError(f"the loader function returned {type(made).__name__}, not an iterable")
        return made
    if not isinstance(loader, Iterable):
        raise TypeError(f"a loader must be an iterable of batches, got {type(loader).__name__}")
    return loader


def run_loop(
    loader: LoaderSource,
    step: Step,
    limits: LoopLimits | None = None,
    *,
    label: str = "loader",
    samples_of: Callable[[Any], int] = batch_samples,
    progress: Callable[[LoopEvent], None] | None = None,
    cancel: threading.Event | None = None,
) -> tuple[LoopRun, LoaderFacts | None]:
    """Run `for batch in loader: step(batch)` within `limits`, timing every wait and step; with
    what the loader iterated and its first batch say about it (`LoaderFacts`)."""
    limits = limits or LoopLimits()
    fetcher = _Fetcher(loader)
    loop = InstrumentedLoop(samples_of)
    kept: list[Any] = []
    ended = "batches"

    def report(message: str, started: float) -> None:
        if progress is not None:
            done = max(
                (loop.steps_done + 1) / limits.max_batches,
                (time.perf_counter() - started) / limits.max_seconds,
            )
            progress(LoopEvent(label, min(done, 1.0), message))

    who = loader_words(label)
    oom_start = oom_kills()

    def failed(exc: BaseException, index: int) -> LoaderFailed:
        """The loader's error as the loop reports it; a DataLoader worker that died is named
        with its signal and the likely cause, as the exported loader names it."""
        workers = getattr(fetcher._iterator, "_workers", None)
        meter = loop.meter
        memory = loop_memory(oom_start, meter.peak_child_rss_bytes, meter.peak_rss_bytes)
        died = explain(exc, workers, memory)
        if died is not None:
            died.__cause__ = exc
            failure = LoaderFailed(f"{who} failed on batch {index}: {died}")
            failure.__cause__ = died
            return failure
        failure = LoaderFailed(f"{who} raised on batch {index}: {type(exc).__name__}: {exc}")
        failure.__cause__ = exc
        return failure

    def fetch(timeout_s: float, index: int) -> tuple[str, Any]:
        kind, value = fetcher.next(timeout_s, cancel)
        if kind == "error":
            raise failed(value, index)
        if kind == "hung":
            raise LoaderHung(
                f"{who} yielded no batch {index} within {timeout_s:g} s: it looks hung "
                "(a stuck read, a worker that died, a lock); the loop stopped waiting"
            )
        return kind, value

    try:
        loop.start()
        started = loop.started_at
        report("waiting for the first batch", started)
        loop.resumed()
        kind, first = fetch(limits.first_batch_timeout_s, 1)
        if kind == "end":
            raise LoaderEmpty(f"{who} yielded no batch: its iterator ended at once")
        if kind == "cancelled":
            raise LoaderError("cancelled before the first batch")
        loop.arrived(first)
        facts = LoaderFacts.of(fetcher.made, first)
        kept.append(first)
        step(first)
        loop.stepped()
        loop_started = time.perf_counter()
        while True:
            if loop.steps_done + 1 >= limits.max_batches:
                break
            if time.perf_counter() - loop_started >= limits.max_seconds:
                ended = "seconds"
                break
            if cancel is not None and cancel.is_set():
                ended = "cancelled"
                break
            kind, batch = fetch(limits.batch_timeout_s, loop.steps_done + 2)
            if kind in ("end", "cancelled"):
                ended = "epoch" if kind == "end" else "cancelled"
                break
            loop.arrived(batch)
            step(batch)
            loop.stepped()
            if len(kept) < limits.replay_batches:
                kept.append(batch)
            report(f"batch {loop.steps_done + 1}", started)
            loop.resumed()
    except RuntimeError as exc:
        # torch's SIGCHLD handler raises a worker's death in the main thread, wherever it is
        if not deaths_in(exc):
            raise
        raise failed(exc, loop.steps_done + 1)  # noqa: B904 (its cause is set: torch's error)
    finally:
        loop.stop()
        fetcher.close()
    notes = _skipped_note(fetcher.made) + _throttled_note(fetcher.made)
    replay_steps, replay_samples, replay_cpu = _replay(
        kept, step, loop.steps_done, samples_of, cancel
    )
    run = loop.record(label, ended)
    # the steps' CPU is the replay's (the process tree's: the step's own threads included,
    # which the training thread's clock misses), per batch, over every batch's step
    step_cpu = replay_cpu / len(replay_steps) * run.batches if replay_steps else None
    run = dataclasses.replace(
        run, replay_step_s=tuple(replay_steps), replay_samples=tuple(replay_samples),
        replay_cpu_s=replay_cpu, notes=notes, step_cpu_s=step_cpu,
    )  # fmt: skip
    return run, facts


def _skipped_note(loader: Iterable[Any] | None) -> tuple[str, ...]:
    """What a loader with a sample policy (`native_loader.sample_errors`, the exported loader's
    datasets) skipped: samples that failed to read or decode and were left out."""
    dataset = getattr(loader, "dataset", loader)
    stats = getattr(dataset, "sample_stats", None)
    if not callable(stats):
        return ()
    counts = dict(stats())
    seen, skipped = counts.get("samples_seen", 0), counts.get("samples_skipped", 0)
    return (f"samples that failed to read or decode and were skipped: {skipped:,} of {seen:,}",)


def _throttled_note(loader: Iterable[Any] | None) -> tuple[str, ...]:
    """What the storage's request-rate limit did to a loader whose datasets count it
    (`reader_stats`): answers asking to slow down (503 SlowDown), and the readers' waits."""
    dataset = getattr(loader, "dataset", loader)
    stats = getattr(dataset, "reader_stats", None)
    if not callable(stats):
        return ()
    counts = dict(stats())
    throttled = counts.get("throttled", 0)
    if not throttled:
        return ()
    waited_s = counts.get("rate_limited_ms", 0) / 1000
    return (
        f"the storage throttled {throttled:,} requests (503 SlowDown: its request-rate limit); "
        f"the readers cut their send rate {counts.get('rate_cuts', 0):,} times and held requests "
        f"back {waited_s:,.1f} s in all, so this rate is the storage's limit, not the loader's",
    )


def _replay(
    kept: list[Any],
    step: Step,
    measured: int,
    samples_of: Callable[[Any], int],
    cancel: threading.Event | None,
) -> tuple[list[float], list[int], float]:
    """The step on batches already in memory, as many times as the loop ran it (within
    REPLAY_MAX_S): how fast the loop runs when loading costs nothing."""
    times: list[float] = []
    counts: list[int] = []
    if not kept or measured == 0:
        return times, counts, 0.0
    meter = TreeMeter()
    meter.start()
    deadline = time.monotonic() + REPLAY_MAX_S
    for i in range(measured):
        if time.monotonic() > deadline or (cancel is not None and cancel.is_set()):
            break
        batch = kept[i % len(kept)]
        started = time.monotonic()
        step(batch)
        times.append(time.monotonic() - started)
        counts.append(samples_of(batch))
    meter.read()
    return times, counts, meter.cpu_s

"""The trial's deadline: its measurements run in a thread of their own while the caller's thread
keeps the budget, whatever the user's transform does.

A transform runs in this process in the decode probe and in the 0-worker slices, and nothing
can interrupt a Python call that never returns. So the caller's thread only watches: it passes
on the caller's cancel, reports progress when the measurements have been quiet for
`HEARTBEAT_S` (naming the transform call that is taking long), and `overrun_s` past the budget
it stops the trial with a TimeoutError naming the sample. A thread stuck in a transform is left
behind (a daemon: it does not keep the process alive); DataLoader workers are daemon processes,
ended when the process exits, and their batches time out at the budget's end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from advisor.measure.trial.data import TrialEvent, TrialProgress
from advisor.measure.trial.probes import WatchedTransform
from native_loader.sample_errors import transform_label

HEARTBEAT_S = 4.0  # the longest the trial stays silent
UNWIND_S = 0.4  # how long Ctrl-C waits for the measurements to close their loaders
_TICK_S = 0.1

T = TypeVar("T")


def overrun_s(seconds: float) -> float:
    """How far past its budget a trial may run before the deadline stops it: the sweep's last
    slice and the loaders' shutdown fit in it (5 s, or a fifth of a long budget)."""
    return max(5.0, 0.2 * seconds)


class TrialDeadline:
    """Runs a trial's measurements in a thread and keeps its budget from the caller's."""

    def __init__(
        self, seconds: float, transform: WatchedTransform, progress: TrialProgress | None
    ) -> None:
        self.seconds = seconds
        self.transform = transform
        self.progress = progress
        self.started = time.monotonic()
        self.last_event = self.started
        self.last = TrialEvent("storage", 0.0, "starting")
        self._lock = threading.Lock()

    def report(self, event: TrialEvent) -> None:
        """The measurements' progress callback (also the deadline's own heartbeat)."""
        with self._lock:
            self.last_event, self.last = time.monotonic(), event
        if self.progress is not None:
            self.progress(event)

    def run(
        self, measure: Callable[[], T], stop: threading.Event, cancel: threading.Event | None
    ) -> T:
        """`measure()` in a thread; `stop` is set on `cancel`, on Ctrl-C and at the deadline."""
        outcome: list[tuple[bool, object]] = []
        # Waited on instead of Thread.join: a join that Ctrl-C interrupts marks the thread
        # stopped while it still runs (CPython's bpo-45274 handling), and the unwind below
        # would not wait for it.
        done = threading.Event()

        def body() -> None:
            try:
                outcome.append((True, measure()))
            except BaseException as exc:  # handed to the caller's thread
                outcome.append((False, exc))
            finally:
                done.set()

        thread = threading.Thread(target=body, name="loader-advisor-trial", daemon=True)
        thread.start()
        deadline = self.started + self.seconds + overrun_s(self.seconds)
        try:
            while not done.wait(_TICK_S):
                if cancel is not None and cancel.is_set():
                    stop.set()
                now = time.monotonic()
                if now > deadline:
                    stop.set()
                    if not done.wait(1.0):  # a loop that checks the clock ends now
                        raise TimeoutError(self._stuck(now))
                elif now - self.last_event > HEARTBEAT_S:
                    self._heartbeat(now)
        except BaseException:
            stop.set()  # Ctrl-C in the caller: let the measurements close their loaders
            done.wait(UNWIND_S)
            raise
        ok, value = outcome[0]
        if not ok:
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]

    def _running(self, now: float) -> tuple[str, float] | None:
        """(sample, seconds) of the transform call in progress in this process, if any."""
        running = self.transform.running
        return None if running is None else (running[0], now - running[1])

    def _heartbeat(self, now: float) -> None:
        used, label = now - self.started, transform_label(self.transform)
        running = self._running(now)
        if running is not None and running[1] > HEARTBEAT_S:
            left = self.started + self.seconds + overrun_s(self.seconds) - now
            message = (
                f"{label} has run for {running[1]:.0f} s on {running[0]}; the trial gives up "
                f"on it in {max(left, 0):.0f} s"
            )
        else:
            message = f"still measuring, {used:.0f} of {self.seconds:g} s: {self.last.message}"
        self.report(TrialEvent(self.last.phase, min(1.0, used / self.seconds), message))

    def _stuck(self, now: float) -> str:
        running = self._running(now)
        if running is not None:
            return (
                f"{transform_label(self.transform)} has not returned after {running[1]:.0f} s "
                f"on {running[0]}: the trial stopped at its {self.seconds:g} s budget"
            )
        return (
            f"the trial did not end within its {self.seconds:g} s budget; it stopped while "
            f"'{self.last.message}' (a DataLoader worker's transform that never returns?)"
        )

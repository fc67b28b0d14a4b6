"""What every wizard step shares: the session, where the user is, status, errors and listeners.

`WizardContext` is the status board the steps report to and the views listen to. Long work (demo
start-up, profile, trial, re-shard) runs through its one `JobRunner`; progress and results reach
the views through `subscribe` callbacks (called from the worker thread too). Every engine error
becomes one plain sentence (`advisor.core.errors.describe`) in `errors[step]`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from enum import Enum
from typing import TYPE_CHECKING

from advisor.core.errors import describe
from advisor.wizard.jobs import JobRunner, JobRunningError, Work

if TYPE_CHECKING:
    from advisor.session import AdvisorSession

STEPS = ("dataset", "hardware", "workload", "trial", "recommendation", "export")
STEP_TITLES = {
    "dataset": "Dataset",
    "hardware": "Hardware",
    "workload": "Workload",
    "trial": "Live trial",
    "recommendation": "Recommendation",
    "export": "Export",
}
THREAD_PREFIX = "loader-advisor-wizard"


class Topic(str, Enum):
    """What changed, as listeners are told (`WizardContext.subscribe`)."""

    ALL = "all"  # never notified: a view's first refresh, of everything
    STEP = "step"
    STATUS = "status"
    ERROR = "error"
    DATASET = "dataset"  # the dataset fields were filled in (the demo)
    PROFILE = "profile"
    HARDWARE = "hardware"
    WORKLOAD = "workload"
    TRIAL_POINT = "trial_point"
    TRIAL = "trial"
    RECOMMENDATION = "recommendation"
    EXPORT = "export"
    SAVED = "saved"

    def __str__(self) -> str:
        return self.value


Listener = Callable[[Topic], None]


class WizardContext:
    """The session, the current step, status and errors, listeners and the one job runner."""

    def __init__(self, session: AdvisorSession) -> None:
        self.session = session
        self.step = 0
        self.furthest = 0  # the furthest step reached: its pill and all before it can be visited
        self.job_step: str | None = None  # the step whose button started the running job
        self.errors: dict[str, str] = {}
        self.progress = 0.0
        self.message = ""
        self._listeners: list[Listener] = []
        self._jobs = JobRunner(THREAD_PREFIX)

    @property
    def step_name(self) -> str:
        return STEPS[self.step]

    # --- observation ---------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        """Call `listener(topic)` on every change (`Topic` lists them)."""
        self._listeners.append(listener)

    def notify(self, topic: Topic) -> None:
        for listener in list(self._listeners):
            try:
                listener(topic)
            except Exception as exc:  # a broken view must not break the engine's work
                self.errors.setdefault(self.step_name, f"display error: {describe(exc)}")

    def report(self, message: str, progress: float | None = None) -> None:
        """The status line (and progress, clipped to [0, 1])."""
        self.message = message
        if progress is not None:
            self.progress = max(0.0, min(1.0, progress))
        self.notify(Topic.STATUS)

    def set_error(self, step: str, message: str | None) -> None:
        """Show `message` as `step`'s error, or clear it (None)."""
        if message is None:
            self.errors.pop(step, None)
        else:
            self.errors[step] = message
        self.notify(Topic.ERROR)

    # --- background work ----------------------------------------------------------------------
    @property
    def job(self) -> str | None:
        """The running background job's name, or None."""
        return self._jobs.job

    @property
    def busy(self) -> bool:
        return self._jobs.busy

    def start(self, job: str, step: str, work: Work) -> bool:
        """Run `work(cancel)` in the worker thread; False (and an inline note) if one is running.
        An error it raises becomes `step`'s error."""

        def started() -> None:
            self.job_step = step
            self.set_error(step, None)
            self.report(f"{job} ...", 0.0)

        def failed(exc: BaseException) -> None:
            self.set_error(step, describe(exc))
            self.report(f"{job} failed", 0.0)

        try:
            self._jobs.start(
                job, work, started=started, failed=failed, ended=lambda: self.notify(Topic.STATUS)
            )
        except JobRunningError as busy:
            self.set_error(step, f"please wait: {busy.running} is still running (or cancel it)")
            return False
        return True

    def cancel(self) -> None:
        """Ask the running work to stop; the engine returns what it has so far."""
        job = self._jobs.cancel()
        if job is not None:
            self.report(f"cancelling {job} ...")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background work (if any) is done and its thread has ended."""
        return self._jobs.wait(timeout)

    @property
    def future(self) -> Future[None] | None:
        """The running (or last) background job; its result is None, errors are in `errors`."""
        return self._jobs.future

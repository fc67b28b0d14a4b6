"""Step 4: the live loader trial, its points streaming in while it runs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from advisor.core.bounds import TrialBudget
from advisor.core.errors import describe
from advisor.core.units import duration
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep

if TYPE_CHECKING:
    from advisor.measure.trial.data import TrialEvent
    from advisor.measure.trial.results import LoaderPoint, TrialResult

STEP = "trial"
DEFAULT_TRIAL_SECONDS = TrialBudget.seconds


class TrialStep:
    """The time budget and the points measured so far."""

    def __init__(self, context: WizardContext, export: ExportStep) -> None:
        self.context = context
        self.export = export
        self.seconds = DEFAULT_TRIAL_SECONDS
        self._points: list[LoaderPoint] = []

    @property
    def points(self) -> list[LoaderPoint]:
        """The sweep's points so far; none once the session dropped the trial they came from
        (its setup changed: a chart of them would show a stale sweep)."""
        if self.context.session.trial is None and self.context.session.trial_dropped:
            return []
        return self._points

    @points.setter
    def points(self, points: list[LoaderPoint]) -> None:
        self._points = points

    @property
    def result(self) -> TrialResult | None:
        """The last trial's result (None before the first)."""
        return self.context.session.trial

    def forget_points(self) -> None:
        self.points = []

    def run(self, seconds: float | None = None) -> bool:
        """Run the live loader trial in the background; points stream in via TRIAL_POINT."""
        if seconds is not None:
            self.seconds = seconds
        try:
            TrialBudget(self.seconds)
        except ValueError as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.points = []
        self.context.notify(Topic.TRIAL_POINT)
        budget = self.seconds

        def work(cancel: threading.Event) -> None:
            result = self.context.session.run_trial(
                seconds=budget, progress=self._on_event, cancel=cancel
            )
            self.points = list(result.sweep) or self.points
            self.export.forget_bundle()
            done = "cancelled" if result.cancelled else "done"
            self.context.report(f"trial {done} in {duration(result.seconds_used)}", 1.0)
            self.context.notify(Topic.TRIAL)

        return self.context.start("trial", STEP, work)

    def _on_event(self, event: TrialEvent) -> None:
        if event.point is not None:
            self.points = [*self.points, event.point]
            self.context.notify(Topic.TRIAL_POINT)
        left = self.seconds * (1.0 - event.fraction)
        self.context.report(f"{event.message} ({duration(left)} left)", event.fraction)

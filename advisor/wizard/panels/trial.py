"""Step 4's view: the time budget, Run trial, the live throughput chart and the trial's table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ipywidgets as widgets
import plotly.graph_objects as go

from advisor.core.bounds import TrialBudget, range_of
from advisor.measure.trial.results import CountRate, summarise
from advisor.report import trial_rows
from advisor.report.measured import count_rows
from advisor.wizard import charts
from advisor.wizard.context import Topic
from advisor.wizard.panels.base import (
    LABEL,
    StepPanel,
    button,
    html_area,
    on_value,
    output,
    rows_html,
    set_outputs,
    status_slot,
    table,
)
from advisor.wizard.steps.trial import TrialStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    pass


def chart_counts(step: TrialStep) -> tuple[CountRate, ...]:
    """The counts to draw: the finished trial's, else those of the slices streamed so far."""
    trial = step.result
    if trial is not None and trial.counts and step.points == list(trial.sweep):
        return trial.counts
    return summarise(step.points)


class TrialPanel(StepPanel):
    """The budget and Run trial; the chart grows point by point while the trial runs."""

    topics = frozenset({Topic.TRIAL_POINT, Topic.TRIAL})

    def __init__(self, step: TrialStep, workload: WorkloadStep) -> None:
        self.step = step
        self.workload = workload
        budget = range_of(TrialBudget, "seconds")
        self.trial_seconds = widgets.BoundedFloatText(
            value=step.seconds,
            min=budget.low,
            max=budget.high,
            description="Budget (s)",
            style=LABEL,
        )
        self.trial_seconds.add_class("la-input-trial-seconds")
        self.run_trial_button = button(
            "Run trial", "la-btn-run-trial", "primary", "measure DataLoader configurations"
        )
        self.trial_chart = output("la-chart-trial")
        self.trial_summary = html_area("la-trial-summary")
        self.status_slot = status_slot()
        self.figure: go.Figure | None = None  # the last one shown, for tests and users
        self.box = widgets.VBox(
            [
                widgets.HTML(
                    "<b>4. Live trial</b> <span class='la-hint'>reads real objects and runs "
                    "DataLoader configurations for the time budget (optional: Next skips it)"
                    "</span>"
                ),
                widgets.HBox([self.trial_seconds, self.run_trial_button, self.status_slot]),
                self.trial_chart,
                self.trial_summary,
            ]
        )

        def seconds(value: float) -> None:
            step.seconds = float(value)

        on_value(self.trial_seconds, seconds)
        self.run_trial_button.on_click(lambda _: step.run(float(self.trial_seconds.value)))

    def show(self) -> None:
        consumer_rate = self.workload.applied.consumer_rate
        self.figure = charts.trial_chart(chart_counts(self.step), consumer_rate)
        set_outputs(self.trial_chart, charts.figure_bundle(self.figure))
        trial = self.step.result
        if trial is None:
            self.trial_summary.value = ""
            return
        # the rows, then what training saw per count: the same table the CLI prints
        profile = self.step.context.session.profile
        counts = count_rows(trial, records=bool(profile and profile.record_format))
        per_count = rows_html(counts, "la-trial-counts") if counts else ""
        self.trial_summary.value = table(trial_rows(trial)) + per_count

    def show_busy(self, busy: bool) -> None:
        self.run_trial_button.disabled = busy

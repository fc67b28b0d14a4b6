"""Step 4's view: the time budget, Run trial, the live throughput chart and the trial's table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ipywidgets as widgets
import plotly.graph_objects as go

from advisor.core.bounds import TrialBudget, range_of
from advisor.wizard import charts
from advisor.wizard.context import Topic
from advisor.wizard.panels.base import (
    LABEL,
    StepPanel,
    button,
    html_area,
    on_value,
    output,
    set_outputs,
    table,
)
from advisor.wizard.steps.trial import TrialStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    from advisor.measure.trial.results import TrialResult


def trial_rows(trial: TrialResult) -> list[tuple[str, str]]:
    rows = [("time used", f"{trial.seconds_used:.1f} of {trial.seconds_budget:.0f} s")]
    best = trial.best_count()
    if best is not None:
        bound = ">= " if best.lower_bound else ""
        rows.append(
            (
                "best measured",
                f"num_workers={best.num_workers}: {bound}{best.median:,.0f} samples/s median "
                f"({best.low:,.0f}-{best.high:,.0f}) as training sees it",
            )
        )
    if trial.storage is not None:
        rows.append(
            (
                "storage",
                f"first byte p50 {trial.storage.first_byte_p50_s * 1000:.0f} ms, "
                f"up to {trial.storage.best_mb_s:,.0f} MB/s",
            )
        )
    if trial.decode is not None:
        rows.append(
            (
                "decode",
                f"{trial.decode.cpu_s_per_sample * 1000:.2f} ms CPU per sample "
                f"({trial.decode.transform})",
            )
        )
    if trial.cancelled:
        rows.append(("note", "cancelled: partial results"))
    rows += [("note", note) for note in trial.notes]
    return rows


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
        self.figure: go.Figure | None = None  # the last one shown, for tests and users
        self.box = widgets.VBox(
            [
                widgets.HTML(
                    "<b>4. Live trial</b> <span class='la-hint'>reads real objects and runs "
                    "DataLoader configurations for the time budget (optional: Next skips it)"
                    "</span>"
                ),
                widgets.HBox([self.trial_seconds, self.run_trial_button]),
                self.trial_chart,
                self.trial_summary,
            ]
        )

        def seconds(value: float) -> None:
            step.seconds = float(value)

        on_value(self.trial_seconds, seconds)
        self.run_trial_button.on_click(lambda _: step.run(float(self.trial_seconds.value)))

    def show(self) -> None:
        self.figure = charts.trial_chart(self.step.points, self.workload.applied.consumer_rate)
        set_outputs(self.trial_chart, charts.figure_bundle(self.figure))
        trial = self.step.result
        self.trial_summary.value = table(trial_rows(trial)) if trial is not None else ""

    def show_busy(self, busy: bool) -> None:
        self.run_trial_button.disabled = busy

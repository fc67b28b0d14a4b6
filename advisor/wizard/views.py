"""The wizard's shell: the step bar, the current step's panel, errors, status and navigation.

`Wizard` assembles one panel per step (`advisor.wizard.panels`) over the controller's steps and
shows the one the user is on. Colours come from JupyterLab's CSS variables (the stylesheet ships
as package data, advisor/wizard/style.css), so light and dark themes work.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import plotly.graph_objects as go

from advisor.wizard.context import STEP_TITLES, STEPS, Topic
from advisor.wizard.controller import WizardController
from advisor.wizard.package_data import read_package_text
from advisor.wizard.panels.base import StepPanel, button, html_area
from advisor.wizard.panels.dataset import DatasetPanel
from advisor.wizard.panels.export import ExportPanel
from advisor.wizard.panels.hardware import HardwarePanel
from advisor.wizard.panels.recommendation import RecommendationPanel
from advisor.wizard.panels.trial import TrialPanel
from advisor.wizard.panels.workload import WorkloadPanel
from advisor.wizard.steps.reshard import ReshardStep

STYLESHEET = "style.css"


def stylesheet() -> str:
    """The wizard's CSS, read from the installed package."""
    return read_package_text(STYLESHEET, "the wizard's stylesheet")


class Wizard(widgets.VBox):
    """The six-step wizard. `Wizard(controller)`; `wizard.controller` drives it headless."""

    def __init__(self, controller: WizardController | None = None) -> None:
        self.controller = controller or WizardController()
        c = self.controller
        # -- the chrome around the steps
        self.title = widgets.HTML(f"<style>\n{stylesheet()}</style><h3>Loader Advisor</h3>")
        self.steps_bar = html_area("la-steps-bar")
        self.error = html_area("la-error-box")
        self.progress = widgets.FloatProgress(
            value=0.0, min=0.0, max=1.0, layout={"width": "300px"}
        )
        self.progress.add_class("la-progress")
        self.status = html_area("la-status")
        self.cancel_button = button("Cancel", "la-btn-cancel", "warning", "stop the running work")
        self.back_button = button("Back", "la-btn-back", tooltip="previous step")
        self.next_button = button("Next", "la-btn-next", "primary", "next step")
        self.status_row = widgets.HBox([self.progress, self.cancel_button, self.status])
        self.nav_row = widgets.HBox([self.back_button, self.next_button])
        self.body = widgets.VBox()
        # -- the steps
        dataset = self.dataset_panel = DatasetPanel(c.dataset_step)
        hardware = self.hardware_panel = HardwarePanel(c.hardware_step)
        workload = self.workload_panel = WorkloadPanel(c.workload_step)
        trial = self.trial_panel = TrialPanel(c.trial_step, c.workload_step)
        recommendation = self.recommendation_panel = RecommendationPanel(
            c.recommendation_step, c.trial_step, c.workload_step, ReshardStep(c, c.trial_step)
        )
        export = self.export_panel = ExportPanel(c.export_step)
        self.panels: dict[str, StepPanel] = dict(
            zip(STEPS, (dataset, hardware, workload, trial, recommendation, export), strict=True)
        )
        self.step_boxes = {name: panel.box for name, panel in self.panels.items()}
        for name, box in self.step_boxes.items():
            box.add_class(f"la-step-{name}")
        # -- the steps' widgets under the names code that drives the wizard knows them by
        self.uri, self.endpoint = dataset.uri, dataset.endpoint
        self.aws_profile = dataset.aws_profile
        self.profile_button, self.demo_button = dataset.profile_button, dataset.demo_button
        self.demo_layout = dataset.demo_layout
        self.profile_summary, self.size_chart = dataset.profile_summary, dataset.size_chart
        self.target_gpu, self.gpu_count = hardware.target_gpu, hardware.gpu_count
        self.hardware_summary = hardware.hardware_summary
        self.rate_mode, self.data_location = workload.rate_mode, workload.data_location
        self.samples_per_s, self.step_time = workload.samples_per_s, workload.step_time
        self.batch_size, self.epochs = workload.batch_size, workload.epochs
        self.nodes = workload.nodes
        self.gpus_per_node, self.transform = workload.gpus_per_node, workload.transform
        self.workload_fields, self.workload_errors = workload.fields, workload.workload_errors
        self.trial_seconds, self.run_trial_button = trial.trial_seconds, trial.run_trial_button
        self.trial_chart, self.trial_summary = trial.trial_chart, trial.trial_summary
        self.headline, self.cards = recommendation.headline, recommendation.cards
        self.path_taken, self.flow = recommendation.path_taken, recommendation.flow
        self.supply_chart, self.reshard_panel = recommendation.supply_chart, recommendation.reshard
        self.module_preview, self.json_preview = export.module_preview, export.json_preview
        self.save_dir, self.save_stem = export.save_dir, export.save_stem
        self.save_button = export.save_button
        self.saved, self.download = export.saved, export.download
        super().__init__(
            [self.title, self.steps_bar, self.body, self.error, self.status_row, self.nav_row]
        )
        self.add_class("la-wizard")
        self.cancel_button.on_click(lambda _: c.cancel())
        self.next_button.on_click(lambda _: c.next())
        self.back_button.on_click(lambda _: c.back())
        c.subscribe(self.refresh)
        self.refresh(Topic.ALL)

    @property
    def trial_figure(self) -> go.Figure | None:
        """The trial chart last shown."""
        return self.trial_panel.figure

    @property
    def supply_figure(self) -> go.Figure | None:
        """The supply-and-demand chart last shown."""
        return self.recommendation_panel.supply_figure

    def close(self) -> None:
        """Cancel running work (its thread ends within seconds), then close the widgets."""
        self.controller.close()
        super().close()

    def refresh(self, topic: Topic) -> None:
        """Bring the widgets up to date after a controller change (`topic` says which)."""
        everything = topic == Topic.ALL
        if everything or topic == Topic.STEP:
            self.body.children = (self.step_boxes[self.controller.step_name],)
        for panel in self.panels.values():
            if everything or topic in panel.topics:
                panel.show()
        self._show_chrome()

    def _show_chrome(self) -> None:
        c = self.controller
        marks = []
        for index, name in enumerate(STEPS):
            css = "la-current" if index == c.step else ("la-done" if index < c.step else "")
            marks.append(f"<span class='{css}'>{index + 1} {STEP_TITLES[name]}</span>")
        self.steps_bar.value = f"<div class='la-steps'>{''.join(marks)}</div>"
        message = c.errors.get(c.step_name)
        self.error.value = (
            f"<div class='la-error' role='alert'>{html.escape(message)}</div>" if message else ""
        )
        self.progress.value = c.progress
        self.status.value = f"<span class='la-hint'>{html.escape(c.message)}</span>"
        busy = c.busy
        self.cancel_button.disabled = not busy
        self.cancel_button.layout.visibility = "visible" if busy else "hidden"
        for panel in self.panels.values():
            panel.show_busy(busy)
        self.back_button.disabled = busy or c.step == 0
        blocker = c.next_blocker()
        self.next_button.disabled = blocker is not None
        self.next_button.tooltip = blocker or "next step"

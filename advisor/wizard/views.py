"""The wizard's shell: the step bar, the current step's panel, errors, status and navigation.

`Wizard` assembles one panel per step (`advisor.wizard.panels`) over the controller's steps and
shows the one the user is on. Colours come from JupyterLab's CSS variables (the stylesheet ships
as package data, advisor/wizard/style.css), so light and dark themes work.
"""

from __future__ import annotations

import ipywidgets as widgets
import plotly.graph_objects as go

from advisor.wizard.context import STEP_TITLES, STEPS, Topic
from advisor.wizard.controller import WizardController
from advisor.wizard.package_data import read_package_text
from advisor.wizard.panels.base import (
    StepPanel,
    button,
    html_area,
    output,
    set_outputs,
    words,
)
from advisor.wizard.panels.dataset import DatasetPanel
from advisor.wizard.panels.export import ExportPanel
from advisor.wizard.panels.hardware import HardwarePanel
from advisor.wizard.panels.recommendation import RecommendationPanel
from advisor.wizard.panels.trial import TrialPanel
from advisor.wizard.panels.workload import WorkloadPanel
from advisor.wizard.steps.reshard import ReshardStep

STYLESHEET = "style.css"

# Run by JupyterLab's JavaScript renderer (an Output widget's outputs are trusted), `element`
# being the output's node: after a step change, bring the wizard's top into view unless it is
# already in the upper part of the window. The count makes every step change a new output.
_SCROLL_JS = """// step change {count}
setTimeout(() => {{
  const wizard = element.closest('.la-wizard');
  if (!wizard) return;
  const top = wizard.getBoundingClientRect().top;
  if (top < 0 || top > window.innerHeight / 3) wizard.scrollIntoView({{block: 'start'}});
}}, 80);
"""


def scroll_to_top(count: int) -> dict[str, object]:
    """An Output entry whose script scrolls the wizard's top into view (step change `count`)."""
    return {
        "output_type": "display_data",
        "data": {"application/javascript": _SCROLL_JS.format(count=count), "text/plain": ""},
        "metadata": {},
    }


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
        self.pills = [
            button(f"{index + 1} {STEP_TITLES[name]}", "la-pill", tooltip=STEP_TITLES[name])
            for index, name in enumerate(STEPS)
        ]
        self.steps_bar = widgets.HBox(self.pills)
        self.steps_bar.add_class("la-steps-bar")
        # a hidden output whose script brings the wizard's top into view after a step change
        self.scroller = output("la-scroller")
        self.scroller.layout.display = "none"
        self._step_changes = 0
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
        self.status_row.add_class("la-status-row")
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
        # long work reports beside the button that started it (the panel's status slot)
        self.status_home = widgets.Box()
        super().__init__(
            [self.title, self.steps_bar, self.scroller, self.error, self.body, self.status_home,
             self.nav_row]
        )  # fmt: skip
        self.add_class("la-wizard")
        self.cancel_button.on_click(lambda _: c.cancel())
        self.next_button.on_click(lambda _: c.next())
        self.back_button.on_click(lambda _: c.back())
        for index, pill in enumerate(self.pills):
            pill.on_click(lambda _, index=index: c.visit(index))
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
        if topic == Topic.STEP:
            self._step_changes += 1
            set_outputs(self.scroller, scroll_to_top(self._step_changes))
        for panel in self.panels.values():
            if everything or topic in panel.topics:
                panel.show()
        self._show_chrome()

    def _place_status(self, busy: bool) -> None:
        """The progress row sits in the slot of the panel whose button started the work (else
        under the step), and only while there is something to say."""
        c = self.controller
        self.status_row.layout.display = "" if (busy or c.message) else "none"
        self.progress.layout.display = "" if busy else "none"  # once done, its words suffice
        owner = self.panels.get(c.job_step or c.step_name)
        slot = owner.status_slot if owner is not None else None
        if slot is None or c.job_step not in (None, c.step_name):
            slot = self.status_home
        for box in (self.status_home, *(p.status_slot for p in self.panels.values())):
            if box is not None and box is not slot and box.children:
                box.children = ()
        if slot.children != (self.status_row,):
            slot.children = (self.status_row,)

    def _show_chrome(self) -> None:
        c = self.controller
        for index, pill in enumerate(self.pills):
            for css in ("la-current", "la-done"):
                pill.remove_class(css)
            if index == c.step:
                pill.add_class("la-current")
            elif index <= c.furthest:
                pill.add_class("la-done")
            pill.disabled = not c.can_visit(index)
            pill.tooltip = f"open {STEP_TITLES[STEPS[index]]}" if c.can_visit(index) else ""
        message = c.errors.get(c.step_name)
        self.error.value = (
            f"<div class='la-error' role='alert'>{words(message)}</div>" if message else ""
        )
        self.progress.value = c.progress
        self.status.value = f"<span class='la-hint'>{words(c.message)}</span>"
        busy = c.busy
        self._place_status(busy)
        self.cancel_button.disabled = not busy
        self.cancel_button.layout.display = "" if busy else "none"
        for panel in self.panels.values():
            panel.show_busy(busy)
        self.back_button.disabled = busy or c.step == 0
        blocker = c.next_blocker()
        self.next_button.disabled = blocker is not None
        self.next_button.tooltip = blocker or "next step"

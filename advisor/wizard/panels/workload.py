"""Step 3's view: the workload form with live, field-by-field validation."""

from __future__ import annotations

import dataclasses
import html

import ipywidgets as widgets

from advisor.core.units import counted, rate
from advisor.core.workload import DATA_LOCATIONS, Workload
from advisor.wizard.context import Topic
from advisor.wizard.panels.base import LABEL, StepPanel, html_area, text, words
from advisor.wizard.steps.workload import WorkloadStep


def demand(workload: Workload) -> str:
    """The typed workload in words: what one GPU and the whole job consume."""
    ranks = workload.nodes * workload.gpus_per_node
    job = counted(ranks, "GPU")
    if workload.consumer_rate is None:
        return f"rate unknown: the advisor aims for the loader's best throughput ({job})"
    return (
        f"one GPU consumes {rate(workload.consumer_rate)}; the job ({job}) "
        f"{rate(workload.consumer_rate * ranks)}"
    )


# where the consumer rate comes from, said once above the fields
RATE_SOURCE = (
    "Where this comes from: one GPU's training step with its data already loaded. Samples/s "
    "is the batch size / that step time, e.g. 64 samples in 0.25 s = 256 samples/s: take the "
    "step time from your training log, or run advisor.diagnose(loader, step=train_step): "
    'its "with loading free (headspace)" line is this rate.'
)


class WorkloadPanel(StepPanel):
    """Rate or step time, batch size, job size, transform and where the data already is."""

    topics = frozenset({Topic.WORKLOAD, Topic.HARDWARE})  # the GPU count sizes the job

    def __init__(self, step: WorkloadStep) -> None:
        self.step = step
        form = step.form
        self.rate_mode = widgets.ToggleButtons(
            options=[("samples/s per GPU", "rate"), ("step time and batch size", "step")],
            value=form.mode,
            description="Consumption",
            style={**LABEL, "button_width": "auto"},  # the options' words in full
        )
        self.rate_mode.add_class("la-input-rate-mode")
        self.samples_per_s = text(
            "Samples/s per GPU", "la-input-rate", "empty = unknown (aim for the best)"
        )
        self.step_time = text("Step time (s)", "la-input-step-time", "seconds per batch")
        self.batch_size = text("Batch size", "la-input-batch-size", value=form.batch_size)
        self.epochs = text("Epochs", "la-input-epochs", value=form.epochs)
        self.nodes = text("Nodes", "la-input-nodes", value=form.nodes)
        self.gpus_per_node = text("GPUs per node", "la-input-gpus", value=form.gpus_per_node)
        self.get_limit = text(
            "Storage GET/s", "la-input-get-limit", "optional: per prefix, before 503 SlowDown"
        )
        self.transform = text("Transform", "la-input-transform", "optional: module:callable")
        self.data_location = widgets.Dropdown(
            options=[("infer from the URI", ""), *((d, d) for d in DATA_LOCATIONS)],
            value=form.data_location,
            description="Data already on",
            style=LABEL,
            layout=widgets.Layout(width="360px"),
        )
        self.data_location.add_class("la-input-data-location")
        self.loader = text(
            "Your loader", "la-input-loader", "optional: a notebook variable or module:function"
        )
        self.loader_step = text(
            "Your step", "la-input-loader-step", "optional: called with each batch"
        )
        self.demo_note = html_area("la-demo-env")
        self.workload_errors = html_area("la-field-errors")
        self.fields: dict[str, widgets.Text] = {
            "samples_per_s": self.samples_per_s,
            "step_time_s": self.step_time,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "get_limit": self.get_limit,
            "transform": self.transform,
            "loader": self.loader,
            "loader_step": self.loader_step,
        }
        self.box = widgets.VBox(
            [
                widgets.HTML("<b>3. How fast does training consume data?</b>"),
                widgets.HTML(f"<span class='la-hint'>{html.escape(RATE_SOURCE)}</span>"),
                self.rate_mode,
                *(f for n, f in self.fields.items() if n not in ("loader", "loader_step")),
                self.data_location,
                widgets.HTML(
                    "<span class='la-hint'>Have a loader already? Name it: the recommendation "
                    "then leads with your loader's numbers beside the recommended ones.</span>"
                ),
                self.loader,
                self.loader_step,
                self.demo_note,
                self.workload_errors,
            ]
        )
        self.rate_mode.observe(lambda ch: self._edited("mode", ch["new"]), names="value")
        self.data_location.observe(
            lambda ch: self._edited("data_location", ch["new"]), names="value"
        )
        for name, field in self.fields.items():
            field.observe(lambda ch, name=name: self._edited(name, ch["new"]), names="value")

    def _edited(self, name: str, value: str) -> None:
        self.step.edit(name, value)  # live, field-by-field validation
        self.show()

    def show(self) -> None:
        step = self.step
        form = step.form
        self.rate_mode.value = form.mode
        self.data_location.value = form.data_location
        typed = dataclasses.asdict(form)
        for name, field in self.fields.items():
            field.value = typed[name]
        self.samples_per_s.layout.display = "none" if form.mode == "step" else ""
        self.step_time.layout.display = "" if form.mode == "step" else "none"
        note = step.demo_note
        self.demo_note.value = f"<span class='la-hint'>{words(note)}</span>" if note else ""
        self.workload_errors.value = "".join(
            f"<div class='la-error'>{words(m)}</div>" for m in step.field_errors.values()
        )
        workload = step.parsed
        if not step.field_errors and workload is not None:
            self.workload_errors.value = (
                f"<span class='la-hint'>{html.escape(demand(workload))}</span>"
            )

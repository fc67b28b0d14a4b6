"""Step 2's view: one card per GPU, the machine's table, and the GPU to plan for."""

from __future__ import annotations

import html

import ipywidgets as widgets

from advisor.core.bounds import range_of
from advisor.core.workload import Workload
from advisor.measure.hardware import GPU_CATALOG, HardwareProfile
from advisor.measure.hardware.target import INSTANCES, TargetMachine
from advisor.report import gpu_facts, hardware_rows
from advisor.wizard.context import Topic
from advisor.wizard.panels.base import LABEL, StepPanel, html_area, table
from advisor.wizard.steps.hardware import HardwareStep


def gpu_cards(hardware: HardwareProfile) -> str:
    """One card per GPU (probed or planned), or a card saying none was found."""
    if not hardware.gpus:
        return (
            "<div class='la-card'><div class='la-card-title'>no GPU found on this machine</div>"
            "<div class='la-meta'>choose a target GPU below to plan for the training machine"
            "</div></div>"
        )
    cards = []
    for gpu in hardware.gpus:
        parts = gpu_facts(gpu)
        label = "planned" if hardware.planned else "GPU"
        cards.append(
            f"<div class='la-card la-gpu'><div class='la-card-title'>{label} {gpu.index}: "
            f"<span class='la-value'>{html.escape(gpu.name)}</span></div>"
            f"<div class='la-meta'>{html.escape(', '.join(parts))}</div></div>"
        )
    return f"<div class='la-gpus'>{''.join(cards)}</div>"


class HardwarePanel(StepPanel):
    """What the probe found (or the planned GPUs), and the catalogued GPU to plan for."""

    topics = frozenset({Topic.HARDWARE})

    def __init__(self, step: HardwareStep) -> None:
        self.step = step
        self.target_gpu = widgets.Dropdown(
            options=[("this machine as probed", ""), *((n, n) for n in GPU_CATALOG)],
            value=step.target_gpu or "",
            description="Plan for",
            style=LABEL,
            layout=widgets.Layout(width="420px"),
        )
        self.target_gpu.add_class("la-input-target-gpu")
        per_node = range_of(Workload, "gpus_per_node")
        self.gpu_count = widgets.BoundedIntText(
            value=step.gpu_count,
            min=per_node.low,
            max=per_node.high,
            description="GPUs",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="120px"),
        )
        self.gpu_count.add_class("la-input-gpu-count")
        self.instance = widgets.Dropdown(
            options=[("this machine", ""), *((n, n) for n in INSTANCES)],
            value=step.instance or "",
            description="Train on",
            style=LABEL,
            layout=widgets.Layout(width="420px"),
        )
        self.instance.add_class("la-input-target-instance")
        cores = range_of(TargetMachine, "cores")
        self.target_cores = widgets.BoundedFloatText(
            value=step.target_cores or 0.0,
            min=0.0,
            max=cores.high,
            description="cores (0: as listed)",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="220px"),
        )
        self.target_cores.add_class("la-input-target-cores")
        self.hardware_summary = html_area("la-hardware-summary")
        self.box = widgets.VBox(
            [
                widgets.HTML("<b>2. What will it train on?</b>"),
                self.hardware_summary,
                widgets.HTML(
                    "<span class='la-hint'>Training on another machine than this one? Name "
                    "it: the trial measures here, the model plans there.</span>"
                ),
                widgets.HBox([self.instance, self.target_cores]),
                widgets.HTML("<span class='la-hint'>Or plan for a catalogued GPU:</span>"),
                widgets.HBox([self.target_gpu, self.gpu_count]),
            ]
        )
        self.instance.observe(lambda ch: step.run(instance=ch["new"]), names="value")
        self.target_cores.observe(lambda ch: step.run(target_cores=ch["new"]), names="value")
        self.target_gpu.observe(lambda ch: step.run(ch["new"], self.gpu_count.value), names="value")
        self.gpu_count.observe(
            lambda ch: step.run(self.target_gpu.value, ch["new"]) if step.target_gpu else None,
            names="value",
        )

    def show(self) -> None:
        hardware = self.step.hardware
        self.hardware_summary.value = (
            gpu_cards(hardware) + table(hardware_rows(hardware)) if hardware else ""
        )

"""Step 2: this machine as probed, or a catalogued GPU (and how many) to plan for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.errors import describe
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    from advisor.measure.hardware import HardwareProfile

STEP = "hardware"


class HardwareStep:
    """The planned GPU (None: this machine as probed) and the GPU count; probing is quick, so it
    runs inline."""

    def __init__(self, context: WizardContext, workload: WorkloadStep, export: ExportStep) -> None:
        self.context = context
        self.workload = workload
        self.export = export
        self.target_gpu: str | None = None
        self.gpu_count = 1

    @property
    def hardware(self) -> HardwareProfile | None:
        return self.context.session.hardware

    def run(self, target_gpu: str | None = None, gpu_count: int | None = None) -> bool:
        """Probe this machine, optionally planning for catalogued GPUs; False on error."""
        if target_gpu is not None:
            self.target_gpu = target_gpu or None
        if gpu_count is not None:
            self.gpu_count = gpu_count
        try:
            hardware = self.context.session.run_hardware(self.target_gpu, self.gpu_count)
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.context.set_error(STEP, None)
        self.export.forget_bundle()
        self.workload.plan_gpus(hardware.gpu_count)
        self.context.notify(Topic.HARDWARE)
        return True

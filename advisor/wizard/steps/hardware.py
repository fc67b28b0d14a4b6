"""Step 2: this machine as probed, or the machine training runs on (a catalogued instance, or
its cores), or a catalogued GPU (and how many) to plan for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.errors import describe
from advisor.measure.hardware.target import target_machine
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    from advisor.measure.hardware import HardwareProfile

STEP = "hardware"


class HardwareStep:
    """The training machine (a catalogued instance and/or its cores; None: this machine), the
    planned GPU (None: as the machine has) and the GPU count; probing is quick, so it runs
    inline."""

    def __init__(self, context: WizardContext, workload: WorkloadStep, export: ExportStep) -> None:
        self.context = context
        self.workload = workload
        self.export = export
        self.target_gpu: str | None = None
        self.gpu_count = 1
        self.instance: str | None = None
        self.target_cores: float | None = None

    @property
    def hardware(self) -> HardwareProfile | None:
        return self.context.session.hardware

    def run(
        self,
        target_gpu: str | None = None,
        gpu_count: int | None = None,
        *,
        instance: str | None = None,
        target_cores: float | None = None,
    ) -> bool:
        """Probe this machine, optionally planning for the training machine (`instance`: a
        catalogue name, "" for none; `target_cores`: its cores, 0 for the instance's) and
        catalogued GPUs; False on error."""
        if target_gpu is not None:
            self.target_gpu = target_gpu or None
        if gpu_count is not None:
            self.gpu_count = gpu_count
        if instance is not None:
            self.instance = instance or None
        if target_cores is not None:
            self.target_cores = target_cores or None
        try:
            target = target_machine(self.instance, cores=self.target_cores)
            if target is not None and self.target_gpu:
                target = target_machine(self.instance, cores=self.target_cores, gpu=self.target_gpu)
            hardware = self.context.session.run_hardware(
                self.target_gpu, self.gpu_count, target=target
            )
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.context.set_error(STEP, None)
        self.export.forget_bundle()
        self.workload.plan_gpus(hardware.gpu_count)
        self.context.notify(Topic.HARDWARE)
        return True

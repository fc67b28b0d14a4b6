"""The wizard's state and actions, with no widgets: the whole flow runs headless.

`WizardController` holds the six steps (`advisor.wizard.steps`) around one `AdvisorSession` and
moves between them; it adds no advice of its own. It is the steps' shared `WizardContext`: status,
errors, listeners (`subscribe`) and the one background job (`cancel`, `wait`, `future`). Its
actions (`run_profile`, `apply_workload`, ...) are the steps', reached from one place; their
fields are the steps' own (`dataset_step.uri`, `workload_step.form`, `trial_step.points`, ...).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from advisor.wizard.context import STEP_TITLES, STEPS, THREAD_PREFIX, Topic, WizardContext
from advisor.wizard.steps.dataset import DatasetStep
from advisor.wizard.steps.export import ExportStep
from advisor.wizard.steps.hardware import HardwareStep
from advisor.wizard.steps.recommendation import RecommendationStep
from advisor.wizard.steps.trial import DEFAULT_TRIAL_SECONDS, TrialStep
from advisor.wizard.steps.workload import WorkloadForm, WorkloadStep

if TYPE_CHECKING:
    from advisor.core.workload import Workload
    from advisor.decide.recommend import Recommendation
    from advisor.measure.hardware import HardwareProfile
    from advisor.measure.profile import DatasetProfile
    from advisor.measure.trial.results import TrialResult
    from advisor.session import AdvisorSession

__all__ = [
    "DEFAULT_TRIAL_SECONDS",
    "STEPS",
    "STEP_TITLES",
    "THREAD_PREFIX",
    "Topic",
    "WizardController",
    "WorkloadForm",
]


class WizardController(WizardContext):
    """State and actions of the six-step wizard around one `AdvisorSession`."""

    def __init__(
        self,
        session: AdvisorSession | None = None,
        uri: str = "",
        endpoint_url: str = "",
        aws_profile: str = "",
    ) -> None:
        if session is None:
            from advisor.session import AdvisorSession

            session = AdvisorSession()
        super().__init__(session)
        self.export_step = ExportStep(self)
        self.workload_step = WorkloadStep(self, self.export_step)
        self.recommendation_step = RecommendationStep(self, self.export_step, self.workload_step)
        self.trial_step = TrialStep(self, self.export_step)
        self.hardware_step = HardwareStep(self, self.workload_step, self.export_step)
        self.dataset_step = DatasetStep(
            self, self.trial_step, self.export_step, uri, endpoint_url, aws_profile
        )

    # --- results, read from the session -------------------------------------------------------
    @property
    def profile(self) -> DatasetProfile | None:
        return self.session.profile

    @property
    def hardware(self) -> HardwareProfile | None:
        return self.session.hardware

    @property
    def trial(self) -> TrialResult | None:
        return self.session.trial

    @property
    def recommendation(self) -> Recommendation | None:
        return self.session.recommendation

    # --- the steps' actions -------------------------------------------------------------------
    def run_profile(self) -> bool:
        """Profile the typed location in the background; False if it cannot start."""
        return self.dataset_step.run_profile()

    def use_demo(self, layout: str | None = None, profile: bool = True) -> bool:
        """Start (or find) the demo endpoint, fill in the dataset fields, then profile it."""
        return self.dataset_step.use_demo(layout, profile)

    def run_hardware(self, target_gpu: str | None = None, gpu_count: int | None = None) -> bool:
        """Probe this machine (quick), optionally planning for catalogued GPUs; False on error."""
        return self.hardware_step.run(target_gpu, gpu_count)

    def parse_workload(self) -> Workload | None:
        """The typed workload, or None with `workload_step.field_errors` saying what is wrong."""
        return self.workload_step.parse()

    def apply_workload(self) -> bool:
        """Parse the form into the session's workload; False (and inline errors) if invalid."""
        return self.workload_step.apply()

    def run_trial(self, seconds: float | None = None) -> bool:
        """Run the live loader trial in the background; points stream in via `trial_point`."""
        return self.trial_step.run(seconds)

    def run_recommend(self) -> bool:
        """Ask the engine for its recommendation (quick, rule evaluation); False on error."""
        return self.recommendation_step.run()

    def build_export(self) -> bool:
        return self.export_step.build()

    def save(
        self, directory: str | os.PathLike[str] = ".", stem: str = "dataloader_config"
    ) -> bool:
        """Write `<stem>.py` and `<stem>.json` into `directory` (relative to the notebook)."""
        return self.export_step.save(directory, stem)

    def download_uri(self, kind: str = "module") -> str | None:
        """A data: URI of the generated module ("module") or JSON ("json") for a download link."""
        return self.export_step.download_uri(kind)

    # --- navigation ---------------------------------------------------------------------------
    def next_blocker(self) -> str | None:
        """Why Next is not possible now (a plain sentence), or None."""
        if self.busy:
            return f"{self.job} is still running"
        name = self.step_name
        if name == "dataset" and self.profile is None:
            return "profile a data set (or use the demo) first"
        if name == "hardware" and self.hardware is None:
            return "the hardware probe has not run"
        if name == "recommendation" and self.recommendation is None:
            return "there is no recommendation yet"
        if name == "export":
            return "this is the last step"
        return None

    def next(self) -> bool:
        """Leave the current step (committing its input) and enter the next one."""
        blocker = self.next_blocker()
        if blocker is not None:
            self.set_error(self.step_name, blocker)
            return False
        if self.step_name == "workload" and not self.apply_workload():
            return False
        self.set_error(self.step_name, None)
        self.go(self.step + 1)
        return True

    def back(self) -> bool:
        if self.busy or self.step == 0:
            return False
        self.go(self.step - 1)
        return True

    def can_visit(self, step: int) -> bool:
        """True when `step` (0-based) was reached before and nothing runs: its pill opens it."""
        return not self.busy and 0 <= step <= self.furthest and step != self.step

    def visit(self, step: int) -> bool:
        """Go back (or forward again) to a step reached before, from its pill."""
        if not self.can_visit(step):
            return False
        if self.step_name == "workload" and step > self.step and not self.apply_workload():
            return False
        self.go(step)
        return True

    def go(self, step: int) -> None:
        """Show `step` (0-based), running what it needs on entry. The last step's finished
        status ("profile done") and its full progress bar do not follow the user."""
        self.step = max(0, min(len(STEPS) - 1, step))
        self.furthest = max(self.furthest, self.step)
        if not self.busy:
            self.message, self.progress, self.job_step = "", 0.0, None
        self.notify(Topic.STEP)
        name = self.step_name
        if name == "hardware" and self.hardware is None:
            self.run_hardware()
        elif name == "workload":
            self.parse_workload()
            self.notify(Topic.WORKLOAD)
        elif name == "recommendation" and self.recommendation is None:
            self.run_recommend()
        elif name == "recommendation":
            self.recommendation_step.enter()  # a failed comparison runs again, not its error
        elif name == "export" and self.export_step.bundle is None:
            self.build_export()

    def close(self) -> None:
        """Cancel running work and wait briefly for the worker thread to end."""
        self.cancel()
        self.wait(10)

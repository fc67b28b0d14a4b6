"""Step 5: the engine's recommendation (quick: rule evaluation, inline)."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.core.bounds import LoopLimits
from advisor.core.errors import describe
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    from advisor.decide.judged import Comparison, Diagnosis, LocalCopyStep
    from advisor.decide.recommend import Recommendation
    from advisor.measure.loop.run import LoopEvent

STEP = "recommendation"


class RecommendationStep:
    """Asks the session for its recommendation; the result lives in the session. With the
    user's own loader named in the workload, it then runs that loader and the exported one
    through the same step, interleaved (`compare`, in the background, cancellable), for the
    headline's before, after and ratio."""

    def __init__(self, context: WizardContext, export: ExportStep, workload: WorkloadStep) -> None:
        self.context = context
        self.export = export
        self.workload = workload
        self.diagnosis: Diagnosis | None = None  # the user's loader, its first round
        self.comparison: Comparison | None = None
        self.changed: tuple[str, ...] = ()
        self.copy: LocalCopyStep | None = None  # the recommended loader's copy, as it ran
        # the loader and step names the last comparison ran with, and whether it failed (then
        # "Run again" offers it once more, and entering the step again re-runs it)
        self.compared: tuple[str, str] | None = None
        self.failed = False

    @property
    def recommendation(self) -> Recommendation | None:
        return self.context.session.recommendation

    def run(self) -> bool:
        """Ask the engine for its recommendation; False on error."""
        try:
            self.context.session.run_recommend()
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.context.set_error(STEP, None)
        self.export.forget_bundle()
        self._forget_comparison()
        self.context.notify(Topic.RECOMMENDATION)
        if self.workload.form.loader.strip():
            return self.diagnose_user_loader()
        return True

    def _forget_comparison(self) -> None:
        self.diagnosis, self.comparison, self.changed = None, None, ()
        self.compared, self.failed, self.copy = None, False, None

    def _named(self) -> tuple[str, str]:
        form = self.workload.form
        return form.loader.strip(), form.loader_step.strip()

    def enter(self) -> None:
        """Entering the step again with a recommendation: a comparison that failed, or one of
        another loader than the one now named, runs again (an error from before does not
        stay); a loader no longer named takes its comparison and error with it."""
        if self.context.busy or self.recommendation is None:
            return
        named = self._named()
        if not named[0]:
            if self.compared is not None or self.failed:
                self._forget_comparison()
                self.context.set_error(STEP, None)
                self.context.notify(Topic.RECOMMENDATION)
            return
        if self.failed or named != self.compared:
            self.run_again()

    def run_again(self) -> bool:
        """Compare the user's loader with the recommended one once more (the trial and the
        recommendation are kept): after a failed comparison, or a loader fixed since."""
        self.diagnosis, self.comparison, self.changed, self.copy = None, None, (), None
        self.context.notify(Topic.RECOMMENDATION)
        return self.diagnose_user_loader()

    def diagnose_user_loader(self, limits: LoopLimits | None = None, rounds: int = 2) -> bool:
        """Run the user's loader and the exported one through the user's step (or the
        consumer's rate), interleaved for `rounds` rounds of at most `limits` each, in the
        background: their before, after and ratio lead the headline (`advisor.compare`)."""
        self.compared, self.failed = self._named(), False
        try:
            objects = self.workload.user_objects()
        except Exception as exc:
            self.failed = True
            self.context.set_error(STEP, describe(exc))
            self.context.notify(Topic.RECOMMENDATION)
            return False
        if objects is None:
            return False
        loader, step = objects
        session = self.context.session
        rate = session.workload.consumer_rate
        bound = limits or LoopLimits(max_batches=200, max_seconds=10.0)

        def work(cancel: threading.Event) -> None:
            try:
                compare_loaders(cancel)
            except BaseException:
                self.failed = True  # its error is the step's (WizardContext.start)
                self.context.notify(Topic.RECOMMENDATION)
                raise

        def compare_loaders(cancel: threading.Event) -> None:
            from advisor.before_after import advised_loader, changes
            from advisor.diagnosis import compare
            from advisor.measure.loop.run import fresh

            def progress(event: LoopEvent) -> None:
                self.context.report(f"{event.label}: {event.message}", event.fraction)

            if step is None and rate is None:
                raise ValueError("your loader needs a step or a consumption rate to run against")
            self.context.report("writing the recommended loader", 0.0)
            with tempfile.TemporaryDirectory(prefix="advisor-wizard-compare-") as scratch:
                exported, self.copy = advised_loader(
                    session, Path(scratch),
                    lambda line: self.context.report(f"local copy: {line}", 0.0),
                )  # fmt: skip
                if self.copy is not None:  # the advice now has its copy's figure
                    self.export.forget_bundle()
                self.comparison = compare(
                    loader, exported,  # type: ignore[arg-type]
                    step if step is not None else None,  # type: ignore[arg-type]
                    consumer_rate=None if step is not None else rate,
                    limits=bound, rounds=rounds, progress=progress, cancel=cancel,
                )  # fmt: skip
            self.diagnosis = self.comparison.before[0]
            recommendation = self.recommendation
            if recommendation is not None:
                # a loader given as a function is made once more, only to read its settings
                settings = loader if isinstance(loader, Iterable) else fresh(loader)  # type: ignore[arg-type]
                self.changed = changes(settings, recommendation, self.copy)
            session.record_comparison(self.comparison, self.changed)
            self.context.report("your loader and the recommended one measured", 1.0)
            self.context.notify(Topic.RECOMMENDATION)

        return self.context.start("comparing your loader with the recommended one", STEP, work)

"""Step 5: the engine's recommendation (quick: rule evaluation, inline)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from advisor.core.bounds import LoopLimits
from advisor.core.errors import describe
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation
    from advisor.diagnosis import Diagnosis
    from advisor.measure.loop.run import LoopEvent

STEP = "recommendation"


class RecommendationStep:
    """Asks the session for its recommendation; the result lives in the session. With the
    user's own loader named in the workload, it then measures that loader through the same
    step (`diagnose`, in the background) for the headline's before and after."""

    def __init__(self, context: WizardContext, export: ExportStep, workload: WorkloadStep) -> None:
        self.context = context
        self.export = export
        self.workload = workload
        self.diagnosis: Diagnosis | None = None
        self.changed: tuple[str, ...] = ()

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
        self.diagnosis, self.changed = None, ()
        self.context.notify(Topic.RECOMMENDATION)
        if self.workload.form.loader.strip():
            return self.diagnose_user_loader()
        return True

    def diagnose_user_loader(self, limits: LoopLimits | None = None) -> bool:
        """Run the user's loader through their step (or the consumer's rate) for a bounded
        time in the background; its rate and waiting share lead the headline."""
        try:
            objects = self.workload.user_objects()
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        if objects is None:
            return False
        loader, step = objects
        rate = self.context.session.workload.consumer_rate
        bound = limits or LoopLimits(max_batches=200, max_seconds=10.0)

        def work(cancel: threading.Event) -> None:
            from advisor.before_after import changes
            from advisor.diagnosis import diagnose

            def progress(event: LoopEvent) -> None:
                self.context.report(f"your loader: {event.message}", event.fraction)

            if step is None and rate is None:
                raise ValueError("your loader needs a step or a consumption rate to run against")
            self.diagnosis = diagnose(
                loader,  # type: ignore[arg-type]
                step if step is not None else None,  # type: ignore[arg-type]
                consumer_rate=None if step is not None else rate,
                limits=bound, progress=progress, cancel=cancel,
            )  # fmt: skip
            recommendation = self.recommendation
            if recommendation is not None:
                settings = loader if isinstance(loader, Iterable) else None
                self.changed = changes(settings, recommendation) if settings is not None else ()
            self.context.report("your loader measured", 1.0)
            self.context.notify(Topic.RECOMMENDATION)

        return self.context.start("measuring your loader", STEP, work)

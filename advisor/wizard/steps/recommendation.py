"""Step 5: the engine's recommendation (quick: rule evaluation, inline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.errors import describe
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation

STEP = "recommendation"


class RecommendationStep:
    """Asks the session for its recommendation; the result lives in the session."""

    def __init__(self, context: WizardContext, export: ExportStep) -> None:
        self.context = context
        self.export = export

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
        self.context.notify(Topic.RECOMMENDATION)
        return True

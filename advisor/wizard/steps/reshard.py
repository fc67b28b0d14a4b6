"""The recommendation step's re-shard offer: destination and shard size pre-filled from the
advice, the dry-run estimate, the re-shard itself with live progress, then "advise on the
shards" (profile and trial again on the new layout) with before and after side by side.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

from advisor.decide.resharding import advises_reshard
from advisor.reshard import Estimate, ReshardConfig, ReshardEvent, ReshardResult, dry_run
from advisor.reshard import reshard as run_reshard
from advisor.reshard.advice import default_destination, shard_size_text
from advisor.reshard.config import parse_size
from advisor.session import AdvisorSession
from advisor.wizard.context import WizardContext
from advisor.wizard.steps.trial import TrialStep

if TYPE_CHECKING:
    from advisor.core.location import DatasetLocation

STEP = "recommendation"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One layout's numbers for the before/after table."""

    uri: str
    objects: int
    median_object_bytes: int
    best_samples_per_s: float | None
    expected_samples_per_s: float


class ReshardStep:
    """State and actions of the re-shard offer; its work runs in the wizard's worker thread."""

    def __init__(self, context: WizardContext, trial: TrialStep) -> None:
        self.context = context
        self.trial = trial
        self.destination = ""
        self.shard_size = ""
        self.estimate: Estimate | None = None
        self.last_event: ReshardEvent | None = None
        self.result: ReshardResult | None = None
        self.before: Comparison | None = None
        self.after: Comparison | None = None

    @property
    def offered(self) -> bool:
        session = self.context.session
        rec = session.recommendation
        return (
            rec is not None
            and session.location is not None
            and advises_reshard(rec, session.profile)
        )

    def prefill(self) -> None:
        """Destination and shard size from the recommendation (kept once the user edits them)."""
        rec, location = self.context.session.recommendation, self.context.session.location
        if rec is None or location is None:
            return
        self.destination = self.destination or default_destination(location.uri)
        self.shard_size = self.shard_size or shard_size_text(rec.shard_size_bytes)

    def _config(self) -> ReshardConfig:
        return ReshardConfig(shard_size=parse_size(self.shard_size))

    def _source(self) -> DatasetLocation:
        location = self.context.session.location
        assert location is not None, "the re-shard offer needs a profiled location"
        return location

    def run_estimate(self) -> bool:
        source, credentials = self._source(), self.context.session.credentials

        def work(cancel: threading.Event) -> None:
            self.estimate = dry_run(
                source.uri, self.destination, self._config(), endpoint_url=source.endpoint_url,
                profile=source.profile, credentials=credentials,
                anonymous_source=source.anonymous,
            )  # fmt: skip
            self.context.report(f"estimate: {self.estimate.seconds:,.0f} s", 1.0)

        return self.context.start("reshard estimate", STEP, work)

    def start(self) -> bool:
        source, credentials = self._source(), self.context.session.credentials

        def progress(event: ReshardEvent) -> None:
            if event.shards_total:  # listing and index events carry no shard counts
                self.last_event = event
            self.context.report(f"re-shard: {event.message}", event.fraction)

        def work(cancel: threading.Event) -> None:
            self.result = run_reshard(
                source.uri, self.destination, self._config(), endpoint_url=source.endpoint_url,
                profile=source.profile, credentials=credentials,
                anonymous_source=source.anonymous, progress=progress, cancel=cancel,
            )  # fmt: skip
            state = "cancelled" if self.result.cancelled else "done"
            self.context.report(f"re-shard {state}", 1.0)

        return self.context.start("re-shard", STEP, work)

    def advise_on_shards(self) -> bool:
        """Profile and trial the shards with the same workload; keeps the current result as
        `before` and the new one as `after` (the wizard's own session is left as it was)."""
        session = self.context.session
        seconds = self.trial.seconds

        def work(cancel: threading.Event) -> None:
            self.before = _comparison(session)
            shards = AdvisorSession(
                workload=session.workload, hardware=session.hardware, machine=session.machine
            )
            location = self._source()
            shards.set_location(self.destination, location.endpoint_url, location.profile,
                                session.credentials)  # fmt: skip
            shards.run_profile(cancel=cancel)
            shards.run_trial(seconds=seconds, cancel=cancel)
            shards.run_recommend()
            self.after = _comparison(shards)
            self.context.report("advised on the shards", 1.0)

        return self.context.start("advise on the shards", STEP, work)


def _comparison(session: AdvisorSession) -> Comparison:
    profile = session.profile or session.run_profile()
    rec = session.recommendation or session.run_recommend()
    best = session.trial.best_count() if session.trial else None
    return Comparison(
        profile.uri, profile.object_count, profile.sizes.p50,
        best.median if best else None, rec.expected_samples_per_s,
    )  # fmt: skip

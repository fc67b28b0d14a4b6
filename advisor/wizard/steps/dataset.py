"""Step 1: where the training data is (a URI, optional endpoint and AWS profile, or the demo)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from advisor.core.errors import describe
from advisor.core.units import data_size
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep
from advisor.wizard.steps.trial import TrialStep

if TYPE_CHECKING:
    from advisor.measure.profile import DatasetProfile

STEP = "dataset"


class DatasetStep:
    """The typed location and the demo layout; profiling (and demo start-up) run in the
    background. A new profile makes the trial's points and the export stale."""

    def __init__(
        self,
        context: WizardContext,
        trial: TrialStep,
        export: ExportStep,
        uri: str = "",
        endpoint_url: str = "",
        aws_profile: str = "",
    ) -> None:
        self.context = context
        self.trial = trial
        self.export = export
        self.uri, self.endpoint_url, self.aws_profile = uri, endpoint_url, aws_profile
        self.demo_layout = "small-images"
        self.anonymous = False  # a public bucket: unsigned requests, no credentials

    @property
    def profile(self) -> DatasetProfile | None:
        return self.context.session.profile

    def _forget_results(self) -> None:
        self.trial.forget_points()
        self.export.forget_all()
        self.context.notify(Topic.PROFILE)

    def _apply_location(self) -> None:
        """Point the session at the typed location unless it already is (keeps demo credentials)."""
        session = self.context.session
        location = session.location
        if (
            location is not None
            and location.uri == self.uri.strip()
            and (location.endpoint_url or "") == self.endpoint_url.strip()
            and (location.profile or "") == self.aws_profile.strip()
            and location.anonymous == self.anonymous
        ):
            return
        session.set_location(
            self.uri.strip(),
            endpoint_url=self.endpoint_url.strip() or None,
            aws_profile=self.aws_profile.strip() or None,
            anonymous=self.anonymous,
        )
        self._forget_results()

    def run_profile(self) -> bool:
        """Profile the typed location in the background; False if it cannot start."""
        try:
            self._apply_location()
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        return self.context.start("profile", STEP, self._profile)

    def _profile(self, cancel: threading.Event, note: str = "") -> None:
        session = self.context.session
        self.context.report("contacting the endpoint ...", 0.0)
        session.check_location()  # an absent endpoint, then missing credentials, said plainly
        session.run_profile(progress=self.context.report, cancel=cancel)
        self._forget_results()
        done = " (cancelled: partial listing)" if cancel.is_set() else ""
        self.context.report(f"profile done{done}{note}", 1.0)

    def use_demo(self, layout: str | None = None, profile: bool = True) -> bool:
        """Start (or find) the demo endpoint, fill in the dataset fields, then profile it."""
        layout = layout or self.demo_layout
        self.demo_layout = layout
        context = self.context

        def work(cancel: threading.Event) -> None:
            from advisor.core import homecache
            from advisor.demo import start_words

            context.report(start_words(layout or "small-images"), 0.0)
            kept = homecache.size_of(homecache.demo_root())
            uri = context.session.use_demo(layout, progress=context.report)
            added = homecache.size_of(homecache.demo_root()) - kept
            # the demo's data kept for the next kernel: said when it adds to the home cache
            note = f"; the demo kept {data_size(added)}: {homecache.summary()}" if added > 0 else ""
            location = context.session.location
            self.uri = uri
            self.endpoint_url = (location.endpoint_url or "") if location else ""
            self.aws_profile = ""
            self._forget_results()
            context.notify(Topic.DATASET)
            if profile and not cancel.is_set():
                self._profile(cancel, note)
            else:
                context.report(f"demo dataset ready{note}", 1.0)

        return context.start("demo", STEP, work)

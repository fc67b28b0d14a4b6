"""The recommendation step's re-shard offer: destination and shard size pre-filled from the
advice, the dry-run estimate, Start with live progress and Cancel, then "advise on the shards"
(profile and trial again on the new layout) with before and after side by side.

`ReshardStep` holds the state and runs the engine through the wizard's worker thread; the
`ReshardPanel` widgets only set fields and read traits back, like the rest of the wizard.
"""

from __future__ import annotations

import dataclasses
import html
import threading
from typing import Any

import ipywidgets as widgets

from advisor.reshard import Estimate, ReshardConfig, ReshardEvent, ReshardResult, dry_run
from advisor.reshard import reshard as run_reshard
from advisor.reshard.advice import advises_reshard, default_destination, shard_size_text
from advisor.reshard.config import parse_size
from advisor.session import AdvisorSession
from advisor.wizard.controller import WizardController

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
    """State and actions of the re-shard offer, around the wizard's controller."""

    def __init__(self, controller: WizardController) -> None:
        self.controller = controller
        self.destination = ""
        self.shard_size = ""
        self.estimate: Estimate | None = None
        self.last_event: ReshardEvent | None = None
        self.result: ReshardResult | None = None
        self.before: Comparison | None = None
        self.after: Comparison | None = None

    @property
    def offered(self) -> bool:
        rec, session = self.controller.recommendation, self.controller.session
        return (
            rec is not None
            and session.location is not None
            and advises_reshard(rec, session.profile)
        )

    def prefill(self) -> None:
        """Destination and shard size from the recommendation (kept once the user edits them)."""
        rec, location = self.controller.recommendation, self.controller.session.location
        if rec is None or location is None:
            return
        self.destination = self.destination or default_destination(location.uri)
        self.shard_size = self.shard_size or shard_size_text(rec.shard_size_bytes)

    def _config(self) -> ReshardConfig:
        return ReshardConfig(shard_size=parse_size(self.shard_size))

    def _where(self) -> dict[str, Any]:
        session = self.controller.session
        location = session.location
        assert location is not None
        return dict(
            endpoint_url=location.endpoint_url,
            profile=location.profile,
            credentials=session.credentials,
        )

    def run_estimate(self) -> bool:
        location = self.controller.session.location
        assert location is not None

        def work(cancel: threading.Event) -> None:
            self.estimate = dry_run(location.uri, self.destination, self._config(), **self._where())
            self.controller._status(f"estimate: {self.estimate.seconds:,.0f} s", 1.0)

        return self.controller._start("reshard estimate", STEP, work)

    def start(self) -> bool:
        location = self.controller.session.location
        assert location is not None

        def progress(event: ReshardEvent) -> None:
            if event.shards_total:  # listing and index events carry no shard counts
                self.last_event = event
            self.controller._status(f"re-shard: {event.message}", event.fraction)

        def work(cancel: threading.Event) -> None:
            self.result = run_reshard(
                location.uri, self.destination, self._config(), progress=progress,
                cancel=cancel, **self._where(),
            )  # fmt: skip
            state = "cancelled" if self.result.cancelled else "done"
            self.controller._status(f"re-shard {state}", 1.0)

        return self.controller._start("re-shard", STEP, work)

    def advise_on_shards(self) -> bool:
        """Profile and trial the shards with the same workload; keeps the current result as
        `before` and the new one as `after` (the wizard's own session is left as it was)."""
        session = self.controller.session
        seconds = self.controller.trial_seconds

        def work(cancel: threading.Event) -> None:
            self.before = _comparison(session)
            shards = AdvisorSession(workload=session.workload, hardware=session.hardware)
            location = session.location
            assert location is not None
            shards.set_location(self.destination, location.endpoint_url, location.profile,
                                session.credentials)  # fmt: skip
            shards.run_profile(cancel=cancel)
            shards.run_trial(seconds=seconds, cancel=cancel)
            shards.run_recommend()
            self.after = _comparison(shards)
            self.controller._status("advised on the shards", 1.0)

        return self.controller._start("advise on the shards", STEP, work)


def _comparison(session: AdvisorSession) -> Comparison:
    profile = session.profile or session.run_profile()
    rec = session.recommendation or session.run_recommend()
    best = session.trial.best_count() if session.trial else None
    return Comparison(
        profile.uri, profile.object_count, profile.sizes.p50,
        best.median if best else None, rec.expected_samples_per_s,
    )  # fmt: skip


class ReshardPanel:
    """Widgets for `ReshardStep`; `refresh()` after any controller notification."""

    def __init__(self, step: ReshardStep) -> None:
        self.step = step
        self.destination = widgets.Text(description="Destination")
        self.destination.add_class("la-input-reshard-dst")
        self.shard_size = widgets.Text(description="Shard size")
        self.shard_size.add_class("la-input-reshard-size")
        self.estimate_button = widgets.Button(description="Estimate")
        self.estimate_button.add_class("la-btn-reshard-estimate")
        self.start_button = widgets.Button(description="Start", button_style="primary")
        self.start_button.add_class("la-btn-reshard-start")
        self.cancel_button = widgets.Button(description="Cancel")
        self.cancel_button.add_class("la-btn-reshard-cancel")
        self.advise_button = widgets.Button(description="Advise on the shards")
        self.advise_button.add_class("la-btn-reshard-advise")
        self.progress = widgets.FloatProgress(min=0.0, max=1.0)
        self.info = widgets.HTML()
        self.info.add_class("la-reshard-info")
        self.box = widgets.VBox(
            [
                widgets.HTML("<b>Re-shard first</b> <span class='la-hint'>as advised</span>"),
                self.destination,
                self.shard_size,
                widgets.HBox(
                    [
                        self.estimate_button,
                        self.start_button,
                        self.cancel_button,
                        self.advise_button,
                    ]
                ),
                self.progress,
                self.info,
            ]
        )
        self.box.add_class("la-reshard")
        self.estimate_button.on_click(lambda _: self._act(step.run_estimate))
        self.start_button.on_click(lambda _: self._act(step.start))
        self.cancel_button.on_click(lambda _: step.controller.cancel())
        self.advise_button.on_click(lambda _: self._act(step.advise_on_shards))
        step.controller.subscribe(lambda _topic: self.refresh())
        self.refresh()

    def _act(self, action: Any) -> None:
        self.step.destination = self.destination.value.strip()
        self.step.shard_size = self.shard_size.value.strip()
        action()

    def refresh(self) -> None:
        step = self.step
        self.box.layout.display = "" if step.offered else "none"
        if not step.offered:
            return
        step.prefill()
        self.destination.value = self.destination.value or step.destination
        self.shard_size.value = self.shard_size.value or step.shard_size
        if step.last_event is not None:
            self.progress.value = step.last_event.fraction
        if step.result is not None and step.result.index_url:
            self.progress.value = 1.0
        self.info.value = _info_html(step)


def _info_html(step: ReshardStep) -> str:
    parts = []
    if step.estimate is not None:
        e = step.estimate
        parts.append(
            f"plan: {e.shards} shards, {e.samples:,} samples; about {e.seconds:,.0f} s, "
            f"{e.get_requests + e.put_requests + e.list_requests:,} requests "
            f"(~${e.request_cost_usd:.4f})"
        )
    if step.last_event is not None:
        ev = step.last_event
        eta = f", ETA {ev.eta_s:.0f} s" if ev.eta_s is not None else ""
        parts.append(
            f"{ev.shards_done}/{ev.shards_total} shards, {ev.samples_per_s:,.0f} samples/s, "
            f"{ev.mb_per_s:.1f} MB/s{eta}, {ev.retries} retries"
        )
    if step.before is not None and step.after is not None:
        rows = "".join(
            f"<tr><th>{name}</th><td>{html.escape(str(before))}</td>"
            f"<td>{html.escape(str(after))}</td></tr>"
            for name, before, after in _rows(step.before, step.after)
        )
        parts.append(
            "<table class='la-table la-reshard-compare'><tr><th></th><th>before</th>"
            f"<th>after (shards)</th></tr>{rows}</table>"
        )
    return "<br>".join(p if p.startswith("<table") else html.escape(p) for p in parts)


def _rows(before: Comparison, after: Comparison) -> list[tuple[str, object, object]]:
    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f} samples/s"

    return [
        ("data", before.uri, after.uri),
        ("objects", f"{before.objects:,}", f"{after.objects:,}"),
        ("median object", f"{before.median_object_bytes:,} B", f"{after.median_object_bytes:,} B"),
        ("trial, best", rate(before.best_samples_per_s), rate(after.best_samples_per_s)),
        ("expected", rate(before.expected_samples_per_s), rate(after.expected_samples_per_s)),
    ]

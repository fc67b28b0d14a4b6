"""The re-shard offer's view inside the recommendation step: destination and shard size,
Estimate, Start with live progress and Cancel, Advise on the shards, and before against after.

The widgets only set `ReshardStep`'s fields and read its state back, like the rest of the wizard.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as widgets

from advisor.core.units import counted, duration, exact_bytes, mb_per_s, rate
from advisor.wizard.steps.reshard import Comparison, ReshardStep


class ReshardPanel:
    """Widgets for `ReshardStep`; `refresh()` after any notification (it subscribes itself)."""

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
        self.cancel_button.on_click(lambda _: step.context.cancel())
        self.advise_button.on_click(lambda _: self._act(step.advise_on_shards))
        step.context.subscribe(lambda _topic: self.refresh())
        self.refresh()

    def _act(self, action: Callable[[], bool]) -> None:
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
        requests = e.get_requests + e.put_requests + e.list_requests
        parts.append(
            f"plan: {counted(e.shards, 'shard')}, {counted(e.samples, 'sample')}; "
            f"about {duration(e.seconds)}, {counted(requests, 'request')} "
            f"(~${e.request_cost_usd:.4f})"
        )
    if step.last_event is not None:
        ev = step.last_event
        eta = f", {duration(ev.eta_s)} left" if ev.eta_s is not None else ""
        parts.append(
            f"{ev.shards_done}/{counted(ev.shards_total, 'shard')}, {rate(ev.samples_per_s)}, "
            f"{mb_per_s(ev.mb_per_s)}{eta}, {counted(ev.retries, 'retry', 'retries')}"
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
    def maybe(value: float | None) -> str:
        return "-" if value is None else rate(value)

    return [
        ("data", before.uri, after.uri),
        ("objects", counted(before.objects, "object"), counted(after.objects, "object")),
        (
            "median object",
            exact_bytes(before.median_object_bytes),
            exact_bytes(after.median_object_bytes),
        ),
        ("trial, best", maybe(before.best_samples_per_s), maybe(after.best_samples_per_s)),
        ("expected", maybe(before.expected_samples_per_s), maybe(after.expected_samples_per_s)),
    ]

"""Step 5's view: the headline, supply against demand, the re-shard offer, one card per decision
and the decision flow with the path taken."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import plotly.graph_objects as go

from advisor.core.units import per_s, rate
from advisor.decide.recommend import S3_ONLY, Decision, Recommendation
from advisor.measure.trial.results import READ_LISTED, READ_PATH_WORDS
from advisor.report.before_after import copy_note
from advisor.report.headline import Headline, headline_lines, verdict_headline
from advisor.report.recommendation import decision_label, decision_value
from advisor.wizard import charts
from advisor.wizard.context import Topic
from advisor.wizard.evidence import evidence_rows
from advisor.wizard.flow import flow_bundle
from advisor.wizard.panels.base import (
    StepPanel,
    button,
    html_area,
    output,
    set_outputs,
    status_slot,
    words,
)
from advisor.wizard.panels.history import HistoryPanel
from advisor.wizard.panels.reshard import ReshardPanel
from advisor.wizard.steps.recommendation import RecommendationStep
from advisor.wizard.steps.reshard import ReshardStep
from advisor.wizard.steps.trial import TrialStep
from advisor.wizard.steps.workload import WorkloadStep

if TYPE_CHECKING:
    from advisor.decide.judged import Comparison, Diagnosis
    from advisor.measure.trial.results import TrialResult


def shown_decisions(rec: Recommendation, is_s3: bool) -> list[Decision]:
    """The decisions that carry an action for this data (`Recommendation.applies`: no S3-only
    cards for a folder, no layout cards for a copy; none for data the session does not read
    from S3)."""
    return [d for d in rec.decisions if (is_s3 or d.name not in S3_ONLY) and rec.applies(d)]


def decision_card(decision: Decision) -> str:
    """One decision as an HTML card: the value and why in plain words; the evidence (labelled
    values with units) and the rules behind a folded "details"."""
    meta = "measured" if decision.measured else "predicted"
    rows = evidence_rows(decision.evidence)
    if decision.rules:
        rows.append(("Rules", ", ".join(decision.rules)))
    rows.append(("Confidence", str(decision.confidence)))
    table = decision.evidence.get("sweep_table")
    details = (
        (sweep_table_html(table) if isinstance(table, dict) and table else "")
        + "<table class='la-table la-evidence'>"
        + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )
    return (
        f"<div class='la-card'><div class='la-card-title'>{html.escape(decision_label(decision))}"
        f" <span class='la-value'>{html.escape(decision_value(decision))}</span>"
        f" <span class='la-meta'>({meta})</span></div>"
        f"<div>{words(decision.rationale)}</div>"
        f"<details class='la-details'><summary>evidence</summary>{details}</details></div>"
    )


def sweep_table_html(table: dict[str, Any]) -> str:
    """The measured table: per num_workers the median samples/s training saw, the slices'
    spread ("at least": no steady state, a lower bound) and the model's prediction."""
    rows = [
        "<tr><th>num_workers</th><th>measured (median)</th><th>slices</th><th>predicted</th></tr>"
    ]
    for workers, row in table.items():
        bound = "at least " if row.get("lower_bound") else ""
        rows.append(
            f"<tr><td>{html.escape(str(workers))}</td>"
            f"<td>{bound}{rate(float(row['median']))}</td>"
            f"<td>{per_s(float(row['low']))}-{per_s(float(row['high']))}</td>"
            f"<td>{rate(float(row['predicted']))}</td></tr>"
        )
    return f"<table class='la-table la-sweep'>{''.join(rows)}</table>"


def headline(
    rec: Recommendation,
    trial: TrialResult | None,
    consumer_rate: float | None,
    diagnosis: Diagnosis | None = None,
    changed: tuple[str, ...] = (),
    comparison: Comparison | None = None,
    copy_note: str | None = None,
) -> str:
    """What to change and its measured effect first; then the DataLoader call to write; where
    the recommended loader copied the set first, where the copy is and what the cache holds."""
    said = headline_lines(rec, trial, consumer_rate, diagnosis, changed, comparison)
    action = said.pop() if said[-1].startswith("To keep up") else None
    if copy_note is not None:
        said.append(copy_note)
    lines = [words(line) for line in said]
    lines[0] = f"<b>{lines[0]}</b>"
    kwargs = ", ".join(f"{k}={v!r}" for k, v in rec.dataloader_kwargs().items())
    code = f"<code>DataLoader(dataset, {html.escape(kwargs)})</code>"
    if any(d.name == "requests_in_flight" for d in rec.decisions):  # streaming (RD-1, RD-2)
        reader = f"max_inflight_requests={int(rec.requests_in_flight)}"
        if any(d.name == "inflight_bytes" for d in rec.decisions):
            reader += f", max_inflight_bytes={int(rec.inflight_bytes) >> 20} * 2**20"
        code += f" with <code>ReaderConfig({reader})</code> per worker"
    lines.append(code)
    verdict = verdict_headline(rec, comparison)
    if verdict is not None:  # in view: keeps up, short within the noise, or short (red)
        lines.insert(1, verdict_html(verdict))
    # the next step with its reasons, and the notes: the evidence behind the verdict
    notes = [words(note) for note in (*([action] if action else []), *rec.notes,
                                      *rec.cost_notes)]  # fmt: skip
    body = "".join(f"<div>{line}</div>" for line in lines)
    if notes:
        body += (
            "<details class='la-details'><summary>evidence and notes</summary>"
            + "".join(f"<div>{n}</div>" for n in notes)
            + "</details>"
        )
    return f"<div class='la-headline-box'>{body}</div>"


def verdict_html(verdict: Headline) -> str:
    """The verdict in its tone's colour: red (`la-error`) only for a loader short beyond the
    measured noise."""
    red = " la-error" if verdict.tone == "short" else ""
    return (
        f"<span class='la-verdict la-verdict-{verdict.tone}{red}'>"
        f"{html.escape(verdict.text)}</span>"
    )


def path_html(path: list[str]) -> str:
    """The rules the recommendation went through, in order, as highlighted chips."""
    chips = " → ".join(f"<span class='la-taken'>{html.escape(rule)}</span>" for rule in path)
    return (
        "<div class='la-hint'>The rules this recommendation went through, in order (in orange "
        f"in the diagram; docs/decision-flow.md explains each):</div><div class='la-steps'>{chips}"
        "</div>"
    )


# Run beside the diagram (JupyterLab's JavaScript renderer, `element` the output's node). JupyterLab
# draws Mermaid as an <img> of the SVG: read the first node of the path taken from that SVG and
# scroll the diagram's box to it.
_SHOW_PATH = {
    "output_type": "display_data",
    "data": {
        "application/javascript": """
let tries = 0;
const show = () => {
  const flow = element.closest('.la-flow');
  const img = flow && flow.querySelector('.jp-RenderedMermaid img');
  if (!img || !img.complete || !img.getBoundingClientRect().height) {
    if (tries++ < 50) setTimeout(show, 100);
    return;
  }
  const svg = new DOMParser().parseFromString(
    decodeURIComponent(img.src.split(',')[1]), 'image/svg+xml').documentElement;
  const node = svg.querySelector('.taken');
  const move = node ? node.getAttribute('transform') || '' : '';
  const at = /translate\\(\\s*([-\\d.]+)[ ,]+([-\\d.]+)/.exec(move);
  const view = (svg.getAttribute('viewBox') || '').split(/[ ,]+/).map(Number);
  if (!at || view.length !== 4 || !view[3]) return;
  const y = (Number(at[2]) - view[1]) * img.getBoundingClientRect().height / view[3];
  const box = img.closest('figure');
  box.scrollTop = Math.max(0, y - 60);
  box.dataset.laPathY = String(y);
};
setTimeout(show, 100);
""",
        "text/plain": "",
    },
    "metadata": {},
}


class RecommendationPanel(StepPanel):
    """The headline, one card per decision that acts on this data, the re-shard offer, supply
    against demand; the rules and the decision flow behind "Details"."""

    topics = frozenset({Topic.RECOMMENDATION})

    def __init__(
        self,
        step: RecommendationStep,
        trial: TrialStep,
        workload: WorkloadStep,
        reshard: ReshardStep,
    ) -> None:
        self.step, self.trial, self.workload = step, trial, workload
        self.headline = html_area("la-headline")
        self.cards = html_area("la-cards")
        self.path_taken = html_area("la-path")
        self.flow = output("la-flow")
        self.supply_chart = output("la-chart-supply")
        self.supply_figure: go.Figure | None = None  # the last one shown, for tests and users
        self.reshard = ReshardPanel(reshard)
        self.history = HistoryPanel(step.context.session)  # the runs kept, side by side
        self.status_slot = status_slot()
        self.run_again_button = button(
            "Run again", "la-btn-run-again", "warning",
            "compare your loader with the recommended one again (the trial is kept)",
        )  # fmt: skip
        self.run_again_button.layout.display = "none"
        self.run_again_button.on_click(lambda _: self.step.run_again())
        self.details_button = widgets.ToggleButton(
            value=False, description="Details: rules and decision flow", icon="chevron-right",
            layout=widgets.Layout(width="auto"),
        )  # fmt: skip
        self.details_button.add_class("la-btn-details")
        self.details = widgets.VBox([self.path_taken, self.flow])
        self.details.add_class("la-details-box")
        self.details.layout.display = "none"
        self.box = widgets.VBox(
            [
                widgets.HTML("<b>5. Recommendation</b>"),
                self.headline,
                self.run_again_button,
                self.status_slot,
                self.cards,
                self.reshard.box,
                self.supply_chart,
                self.history.widget,
                self.details_button,
                self.details,
            ]
        )
        self.details_button.observe(lambda _: self._show_details(), names="value")

    def show_busy(self, busy: bool) -> None:
        """Show "Run again" after a failed comparison, while nothing runs."""
        self.run_again_button.layout.display = "" if self.step.failed and not busy else "none"

    def _show_details(self) -> None:
        """The diagram is drawn when opened (Mermaid cannot lay out text in a hidden box)."""
        opened = bool(self.details_button.value)
        self.details_button.icon = "chevron-down" if opened else "chevron-right"
        self.details.layout.display = "" if opened else "none"
        rec = self.step.recommendation
        if opened and rec is not None:
            set_outputs(self.flow, flow_bundle(rec.path()), _SHOW_PATH)
        else:
            set_outputs(self.flow)

    def show(self) -> None:
        self.history.show()
        rec = self.step.recommendation
        if rec is None:
            self.cards.value = self.headline.value = self.path_taken.value = ""
            set_outputs(self.flow)
            set_outputs(self.supply_chart)
            return
        consumer_rate = self.workload.applied.consumer_rate
        trial = self.trial.result
        self.headline.value = headline(
            rec,
            trial,
            consumer_rate,
            self.step.diagnosis,
            self.step.changed,
            self.step.comparison,
            copy_note(self.step.copy) if self.step.copy is not None else None,
        )
        location = self.step.context.session.location
        is_s3 = location is None or location.is_s3
        cards = "".join(decision_card(d) for d in shown_decisions(rec, is_s3))
        self.cards.value = f"<div>{cards}</div>"
        best = trial.best_count() if trial else None
        read_path = trial.setup.read_path if trial and trial.setup else READ_LISTED
        self.supply_figure = charts.throughput_chart(
            rec.expected_samples_per_s, consumer_rate, best.median if best else None,
            # named where the sweep read something other than the listed objects
            READ_PATH_WORDS.get(read_path) if read_path != READ_LISTED else None,
        )  # fmt: skip
        set_outputs(self.supply_chart, charts.figure_bundle(self.supply_figure))
        self.path_taken.value = path_html(rec.path())
        self._show_details()

"""Step 5's view: the headline, supply against demand, the re-shard offer, one card per decision
and the decision flow with the path taken."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go

from advisor.core.units import binary_size
from advisor.decide.recommend import Decision, Recommendation
from advisor.wizard import charts
from advisor.wizard.context import Topic
from advisor.wizard.flow import flow_bundle
from advisor.wizard.panels.base import StepPanel, html_area, output, set_outputs
from advisor.wizard.panels.reshard import ReshardPanel
from advisor.wizard.steps.recommendation import RecommendationStep
from advisor.wizard.steps.reshard import ReshardStep
from advisor.wizard.steps.trial import TrialStep
from advisor.wizard.steps.workload import WorkloadStep


def _text_of(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_text_of(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text_of(v) for v in value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _evidence_value(key: str, value: object) -> str:
    if key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
        return binary_size(value)
    return _text_of(value)


def decision_card(decision: Decision) -> str:
    """One recommendation decision as an HTML card: value, rationale, evidence, rules."""
    meta = ["measured" if decision.measured else "predicted", f"confidence {decision.confidence}"]
    if decision.rules:
        meta.append("rules " + ", ".join(decision.rules))
    evidence = {k: v for k, v in decision.evidence.items() if k != "sweep_table"}
    facts = "; ".join(f"{k} {_evidence_value(k, v)}" for k, v in evidence.items())
    table = decision.evidence.get("sweep_table")
    return (
        f"<div class='la-card'><div class='la-card-title'>{html.escape(decision.name)} = "
        f"<span class='la-value'>{html.escape(decision.display)}</span></div>"
        f"<div>{html.escape(decision.rationale)}</div>"
        + (sweep_table_html(table) if isinstance(table, dict) and table else "")
        + (f"<div class='la-evidence'>evidence: {html.escape(facts)}</div>" if facts else "")
        + f"<div class='la-meta'>{html.escape(' · '.join(meta))}</div></div>"
    )


def sweep_table_html(table: dict[str, Any]) -> str:
    """NW-3's measured table: per num_workers the median samples/s training saw, its spread
    (">=": no steady state, a lower bound) and the model's prediction."""
    rows = [
        "<tr><th>num_workers</th><th>measured median</th><th>spread</th><th>predicted</th></tr>"
    ]
    for workers, row in table.items():
        bound = "&ge; " if row.get("lower_bound") else ""
        rows.append(
            f"<tr><td>{html.escape(str(workers))}</td>"
            f"<td>{bound}{float(row['median']):,.1f}</td>"
            f"<td>{float(row['low']):,.1f}-{float(row['high']):,.1f}</td>"
            f"<td>{float(row['predicted']):,.1f}</td></tr>"
        )
    return f"<table class='la-table la-sweep'>{''.join(rows)}</table>"


def headline(rec: Recommendation) -> str:
    """The recommendation in two lines: where to read from, and the DataLoader arguments."""
    kwargs = ", ".join(f"{k}={v!r}" for k, v in rec.dataloader_kwargs().items())
    source = f"read from: <b>{html.escape(str(rec.data_source))}</b>"
    if rec.sagemaker_input_mode:
        source += f" (SageMaker input mode {html.escape(str(rec.sagemaker_input_mode))})"
    rows = [source, f"<code>DataLoader(dataset, {html.escape(kwargs)})</code>"]
    if any(d.name == "requests_in_flight" for d in rec.decisions):  # streaming (RD-1, RD-2)
        reader = f"max_inflight_requests={int(rec.requests_in_flight)}"
        if any(d.name == "inflight_bytes" for d in rec.decisions):
            reader += f", max_inflight_bytes={int(rec.inflight_bytes) >> 20} * 2**20"
        rows.append(f"<code>ReaderConfig({reader})</code> per worker")
    if rec.input_bound is True:
        rows.append("<span class='la-error'>the loader cannot keep up with the training</span>")
    elif rec.input_bound is False:
        rows.append("the loader keeps up with the training")
    rows += [html.escape(note) for note in (*rec.notes, *rec.cost_notes)]
    return "".join(f"<div>{row}</div>" for row in rows)


def path_html(path: list[str]) -> str:
    """The rules the recommendation went through, in order, as highlighted chips."""
    chips = " → ".join(f"<span class='la-taken'>{html.escape(rule)}</span>" for rule in path)
    return f"<div class='la-steps'>{chips}</div>"


class RecommendationPanel(StepPanel):
    """The recommendation, its evidence and the path it took through the decision flow."""

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
        self.box = widgets.VBox(
            [
                widgets.HTML("<b>5. Recommendation</b>"),
                self.headline,
                self.supply_chart,
                self.reshard.box,
                self.cards,
                widgets.HTML("<b>Decision flow</b> <span class='la-hint'>(path taken in orange)"),
                self.path_taken,
                self.flow,
            ]
        )

    def show(self) -> None:
        rec = self.step.recommendation
        if rec is None:
            self.cards.value = self.headline.value = self.path_taken.value = ""
            set_outputs(self.flow)
            set_outputs(self.supply_chart)
            return
        self.headline.value = headline(rec)
        self.cards.value = f"<div>{''.join(decision_card(d) for d in rec.decisions)}</div>"
        trial = self.trial.result
        best = trial.best_count() if trial else None
        self.supply_figure = charts.throughput_chart(
            rec.expected_samples_per_s,
            self.workload.applied.consumer_rate,
            best.median if best else None,
        )
        set_outputs(self.supply_chart, charts.figure_bundle(self.supply_figure))
        self.path_taken.value = path_html(rec.path())
        set_outputs(self.flow, flow_bundle(rec.path()))

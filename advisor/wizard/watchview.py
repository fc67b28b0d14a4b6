"""The live view of `advisor.watch` in a notebook: the waiting share over the steps, the verdict
once there are enough steps, and at the end the report (bottleneck, change, what it found).

Updated from the training loop's own thread every `every` steps, at most every UPDATE_S seconds
(a redraw sends one small message; the loop does not wait on the browser)."""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

import ipywidgets as widgets
import plotly.graph_objects as go
from IPython.display import display

from advisor.core.units import rate, share
from advisor.decide.verdict import HIGHLY_INPUT_BOUND, INPUT_BOUND, input_bound
from advisor.report.watch import watch_lines
from advisor.wizard.charts import figure_bundle
from advisor.wizard.panels.base import set_outputs

if TYPE_CHECKING:
    from advisor.decide.watching import WatchReport

UPDATE_S = 0.5


class WatchView:
    """`view.step(...)` as the loop runs, `view.done(report)` when it ends."""

    def __init__(self, label: str, min_steps: int) -> None:
        self.min_steps = min_steps
        self.steps: list[int] = []
        self.shares: list[float] = []
        self._drawn = 0.0
        self.headline = widgets.HTML(f"<b>advisor.watch</b>: {html.escape(label)}, first steps…")
        self.headline.add_class("la-watch-headline")
        self.chart = widgets.Output()
        self.chart.add_class("la-watch-chart")
        self.details = widgets.HTML()
        self.details.add_class("la-watch-details")
        self.box = widgets.VBox([self.headline, self.chart, self.details])
        self.box.add_class("la-watch")
        display(self.box)

    def step(self, done: int, wait_share: float, samples_per_s: float) -> None:
        self.steps.append(done)
        self.shares.append(wait_share)
        verdict = (
            input_bound(wait_share).line.split(":")[0] if done >= self.min_steps else "watching"
        )
        self.headline.value = (
            f"<b>advisor.watch</b>: step {done}: <b>{html.escape(verdict)}</b>, waiting "
            f"{share(wait_share)} of each step, {rate(samples_per_s)}"
        )
        if time.monotonic() - self._drawn >= UPDATE_S:
            self._draw()

    def done(self, report: WatchReport) -> None:
        verdict = report.verdict.line if report.verdict else "too few steps to judge"
        self.headline.value = f"<b>advisor.watch</b>: {html.escape(verdict)}"
        rows = [report.bottleneck.line] if report.bottleneck else []
        rows += [f"change: {report.change.line}"] if report.change else []
        rows += [f"found: {trip.line}" for trip in report.trips]
        rows += [f"proof: {report.proof.line}"] if report.proof else []
        rows += watch_lines(report)[-1:]
        self.details.value = "<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in rows) + "</ul>"
        self._draw()

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        figure = go.Figure(
            go.Scatter(
                x=self.steps,
                y=[100 * s for s in self.shares],
                mode="lines+markers",
                name="waiting for data",
            ),
            layout={
                "title": {"text": "Share of each step spent waiting for data", "x": 0.0},
                "xaxis": {"title": {"text": "step"}},
                "yaxis": {"title": {"text": "% of the step"}, "range": [0, 100]},
                "paper_bgcolor": "rgba(0,0,0,0)",
                "plot_bgcolor": "rgba(0,0,0,0)",
                "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
                "height": 260,
                "showlegend": False,
            },
        )
        for level, words in (
            (INPUT_BOUND, "5%: input-bound above"),
            (HIGHLY_INPUT_BOUND, "20%: highly input-bound above"),
        ):
            figure.add_hline(
                y=100 * level, line_dash="dot", annotation_text=words, line_color="#d62728"
            )
        set_outputs(self.chart, figure_bundle(figure))

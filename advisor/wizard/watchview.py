"""The live view of `advisor.watch` in a notebook: the waiting share over the steps from the
first (a swapped-in loader's marked where it starts), the verdict once there are enough steps,
and at each epoch's end the report (bottleneck, change, what it found).

Updated from the training loop's own thread at the first step, every `every` steps and at each
epoch's end (`advisor.watcher.Doctor`), redrawn at most every UPDATE_S seconds (a redraw sends
one small message; the loop does not wait on the browser)."""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

import ipywidgets as widgets
import plotly.graph_objects as go
from IPython.display import display

from advisor.report.watch import LEVEL_MARKS, live_line, start_line, swap_mark, watch_lines
from advisor.wizard.charts import figure_bundle
from advisor.wizard.panels.base import set_outputs

if TYPE_CHECKING:
    from advisor.decide.judge import JudgedLoop
    from advisor.decide.watching import Change

UPDATE_S = 0.5


class WatchView:
    """`view.step(...)` as the loop runs, `view.done(report)` when it ends."""

    def __init__(self, label: str, min_steps: int) -> None:
        self.min_steps = min_steps
        self.steps: list[int] = []
        self.shares: list[float] = []
        self.swaps: list[tuple[float, str]] = []  # (where on the step axis, its mark's words)
        self._drawn = 0.0
        self.headline = widgets.HTML(f"<b>advisor.watch</b>: {html.escape(start_line(label))}")
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
        line = live_line(done, wait_share, samples_per_s, judged=done >= self.min_steps)
        self.headline.value = f"<b>advisor.watch</b>: {html.escape(line)}"
        if time.monotonic() - self._drawn >= UPDATE_S:
            self._draw()

    def swap(self, after_step: int, change: Change) -> None:
        """The changed loader reads from the step after `after_step` on: a mark between them."""
        self.swaps.append((after_step + 0.5, swap_mark(change)))
        self._draw()

    def done(self, report: JudgedLoop) -> None:
        lines = watch_lines(report)  # its verdict as the headline, the rest below
        self.headline.value = f"<b>advisor.watch</b>: {html.escape(lines[0])}"
        rows = lines[1:]
        self.details.value = "<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in rows) + "</ul>"
        self._draw()

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        set_outputs(self.chart, figure_bundle(self.figure()))

    def figure(self) -> go.Figure:
        """The chart: the waiting share at each point, the levels, the swap."""
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
        for x, words in self.swaps:
            figure.add_vline(x=x, line_dash="dash", line_color="#2ca02c", annotation_text=words)
        for level, words in LEVEL_MARKS:
            figure.add_hline(
                y=100 * level, line_dash="dot", annotation_text=words, line_color="#d62728"
            )
        return figure

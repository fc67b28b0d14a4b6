"""Plotly figure builders for the wizard: pure functions of engine results, easy to test.

Figures are theme-neutral (transparent backgrounds); the wizard's stylesheet colours their text
and grid with JupyterLab's CSS variables, so they read well in light and dark themes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from advisor.core.units import binary_size, per_s, rate

if TYPE_CHECKING:
    from advisor.measure.profile import DatasetProfile
    from advisor.measure.trial.results import CountRate

PINNED_COLOUR = "#1f77b4"
PAGEABLE_COLOUR = "#ff7f0e"
DEMAND_COLOUR = "#d62728"


def _base_layout(title: str, x_title: str, y_title: str) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 14}},
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "height": 300,
        "legend": {"orientation": "h", "y": -0.25},
    }


def size_histogram(profile: DatasetProfile) -> go.Figure:
    """Objects per power-of-two size bin, labelled "64 KiB-128 KiB"."""
    bins = profile.sizes.histogram
    labels = [f"{binary_size(lower)}-{binary_size(lower * 2 if lower else 1)}" for lower, _ in bins]
    counts = [count for _, count in bins]
    suffix = " (sampled listing)" if profile.sampled else ""
    figure = go.Figure(
        go.Bar(x=labels, y=counts, name="objects", marker_color=PINNED_COLOUR),
        layout=_base_layout(f"Object sizes{suffix}", "object size", "objects"),
    )
    figure.update_xaxes(type="category")
    return figure


def trial_chart(counts: Sequence[CountRate], consumer_rate: float | None = None) -> go.Figure:
    """One point per num_workers: the median samples/s training saw over its slices (of the
    slower step model, as the summary and the tables give it), with the slices' range as an
    error bar. Counts that reached no steady state are open triangles: lower bounds. The
    training's demand is a dashed line. Every trace is in the legend."""
    figure = go.Figure(layout=_base_layout("Loader throughput", "num_workers", "samples/s"))
    figure.update_layout(showlegend=True)
    for bound, name, symbol in (
        (False, "median of the slices (bar: slowest to fastest)", "circle"),
        (True, "lower bound: no steady state", "triangle-up-open"),
    ):
        chosen = sorted((c for c in counts if c.lower_bound == bound), key=lambda c: c.num_workers)
        if not chosen and bound:
            continue  # a lower-bound entry only where there is one
        figure.add_trace(
            go.Scatter(
                x=[c.num_workers for c in chosen],
                y=[round(c.median, 1) for c in chosen],
                mode="markers",
                name=name,
                marker={
                    "color": PINNED_COLOUR,
                    "symbol": symbol,
                    "size": 11,
                    "line": {"width": 2, "color": PINNED_COLOUR},
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "color": PINNED_COLOUR,
                    "array": [round(c.high - c.median, 1) for c in chosen],
                    "arrayminus": [round(c.median - c.low, 1) for c in chosen],
                },
                hovertext=[
                    f"num_workers {c.num_workers}: {'>= ' if bound else ''}{rate(c.median)} "
                    f"(median of {c.slower.slices} slices, {per_s(c.low)}-{per_s(c.high)})"
                    for c in chosen
                ],
                hoverinfo="text",
            )
        )
    if consumer_rate:
        workers = [c.num_workers for c in counts] or [0]
        figure.add_trace(
            go.Scatter(
                x=[min(workers) - 0.5, max(workers) + 0.5],
                y=[consumer_rate, consumer_rate],
                mode="lines",
                name=f"training consumes {rate(consumer_rate)}",
                line={"color": DEMAND_COLOUR, "dash": "dash"},
                hoverinfo="name",
            )
        )
    figure.update_xaxes(dtick=1)
    if not counts:  # before a trial: the axes it will fill, and what fills them
        figure.update_xaxes(range=[-0.5, 4.5])
        figure.update_yaxes(range=[0, (consumer_rate or 100) * 1.5])
        figure.add_annotation(
            text="Run the live trial: each num_workers appears here as it is measured",
            x=2, y=(consumer_rate or 100) * 0.75, showarrow=False,
            font={"color": "gray"},
        )  # fmt: skip
    return figure


def throughput_chart(
    expected: float | None,
    consumer_rate: float | None,
    measured_best: float | None = None,
    measured_on: str | None = None,
) -> go.Figure:
    """Expected loader throughput beside the training's consumption rate (samples/s per GPU);
    `measured_on` names what the trial's sweep read where it is not the listed objects."""
    names, values, colours = [], [], []
    on = f" on {measured_on}" if measured_on else ""
    for name, value, colour in (
        ("loader (expected)", expected, PINNED_COLOUR),
        (f"loader (best measured{on})", measured_best, PAGEABLE_COLOUR),
        ("training consumes", consumer_rate, DEMAND_COLOUR),
    ):
        if value is not None:
            names.append(name)
            values.append(round(value, 1))
            colours.append(colour)
    return go.Figure(
        go.Bar(
            x=names,
            y=values,
            marker_color=colours,
            text=[rate(v) for v in values],
            textposition="auto",
            hoverinfo="x+text",
        ),
        layout=_base_layout("Supply and demand per GPU", "", "samples/s"),
    )


def figure_bundle(figure: go.Figure) -> dict[str, Any]:
    """An Output widget entry that JupyterLab's plotly renderer draws (no CDN, no JavaScript)."""
    spec = json.loads(figure.to_json())
    spec["config"] = {"displaylogo": False, "responsive": True}
    title = figure.layout.title.text or "figure"
    return {
        "output_type": "display_data",
        "data": {"application/vnd.plotly.v1+json": spec, "text/plain": f"<plotly figure: {title}>"},
        "metadata": {},
    }

"""Plotly figure builders for the wizard: pure functions of engine results, easy to test.

Figures are theme-neutral (transparent backgrounds); the wizard's stylesheet colours their text
and grid with JupyterLab's CSS variables, so they read well in light and dark themes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from advisor.core.units import binary_size

if TYPE_CHECKING:
    from advisor.measure.profile import DatasetProfile
    from advisor.measure.trial.results import LoaderPoint

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


def trial_chart(points: Sequence[LoaderPoint], consumer_rate: float | None = None) -> go.Figure:
    """Measured samples/s against num_workers, one line pinned and one not; demand as a line.
    Points that reached no steady state (lower bounds) are open triangles."""
    figure = go.Figure(layout=_base_layout("Loader throughput", "num_workers", "samples/s"))
    for pinned, name, colour in ((True, "pin_memory=True", PINNED_COLOUR),
                                 (False, "pin_memory=False", PAGEABLE_COLOUR)):  # fmt: skip
        chosen = sorted((p for p in points if p.pin_memory == pinned), key=lambda p: p.num_workers)
        figure.add_trace(
            go.Scatter(
                x=[p.num_workers for p in chosen],
                y=[round(p.samples_per_s, 1) for p in chosen],
                mode="lines+markers",
                name=name,
                marker_color=colour,
                line_color=colour,
                # an open triangle: no steady state in the trial, the rate is a lower bound
                marker_symbol=["circle" if p.steady else "triangle-up-open" for p in chosen],
                hovertext=["" if p.steady else "lower bound: no steady state" for p in chosen],
            )
        )
    if consumer_rate:
        figure.add_hline(
            y=consumer_rate,
            line_dash="dash",
            line_color=DEMAND_COLOUR,
            annotation_text=f"training consumes {consumer_rate:,.0f}/s",
        )
    figure.update_xaxes(rangemode="tozero", dtick=1)
    return figure


def throughput_chart(
    expected: float | None, consumer_rate: float | None, measured_best: float | None = None
) -> go.Figure:
    """Expected loader throughput beside the training's consumption rate (samples/s per GPU)."""
    names, values, colours = [], [], []
    for name, value, colour in (
        ("loader (expected)", expected, PINNED_COLOUR),
        ("loader (best measured)", measured_best, PAGEABLE_COLOUR),
        ("training consumes", consumer_rate, DEMAND_COLOUR),
    ):
        if value is not None:
            names.append(name)
            values.append(round(value, 1))
            colours.append(colour)
    return go.Figure(
        go.Bar(x=names, y=values, marker_color=colours, text=values, textposition="auto"),
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

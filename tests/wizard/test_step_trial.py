"""The Trial step: the live trial's chart (one point per count, its spread, lower bounds apart)
and a trial cancelled promptly, with the scripted session and the real one."""

from __future__ import annotations

import time
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from advisor.measure.trial.results import summarise
from advisor.wizard import charts
from tests.wizard.conftest import WIDGET_WARNINGS, loader_slice, profiled, wizard_threads

pytestmark = WIDGET_WARNINGS


def test_trial_chart_draws_one_point_per_count_with_its_spread() -> None:
    slices = [loader_slice(0, 100), loader_slice(0, 110), loader_slice(0, 90),
              loader_slice(2, 300), loader_slice(2, 260), loader_slice(2, 280, step="spin"),
              loader_slice(3, 150, steady=False)]  # fmt: skip
    figure = charts.trial_chart(summarise(slices), consumer_rate=200)
    medians, bounds, demand = figure.data
    # one point per count: the median of the slower step model's slices, as the text says
    assert list(medians.x) == [0, 2] and list(medians.y) == [100, 280]
    assert list(medians.error_y.array) == [10, 20] and list(medians.error_y.arrayminus) == [10, 20]
    assert medians.marker.symbol == "circle"
    # a count with no steady state is a lower bound: an open marker of its own
    assert list(bounds.x) == [3] and bounds.marker.symbol == "triangle-up-open"
    assert "lower bound" in bounds.name
    assert list(demand.y) == [200, 200] and "training consumes 200 samples/s" in demand.name
    assert figure.layout.showlegend is True
    best = max(summarise(slices), key=lambda c: c.median)
    assert best.median == max(medians.y)  # the chart agrees with "best measured"


def test_trial_chart_without_demand_or_lower_bounds() -> None:
    figure = charts.trial_chart(summarise([loader_slice(1, 50)]))
    assert [trace.name for trace in figure.data] == [
        "median of the slices (bar: slowest to fastest)"
    ]


def test_the_trial_chart_before_a_trial_says_what_fills_it() -> None:
    """No counts yet: no axes from -1 but the counts a trial measures first, and a hint; a
    chart with counts has no hint."""
    empty = charts.trial_chart([], consumer_rate=300)
    assert list(empty.layout.xaxis.range) == [-0.5, 4.5]
    assert list(empty.layout.yaxis.range) == [0, 450]
    assert [a.text for a in empty.layout.annotations] == [
        "Run the live trial: each num_workers appears here as it is measured"
    ]
    assert not charts.trial_chart(summarise([loader_slice(1, 50)])).layout.annotations


@pytest.mark.timing
def test_cancel_stops_the_trial_promptly(wizard: Any) -> None:
    c = wizard.controller
    c.session.step_s = 0.05  # 200 points would take 10 s
    profiled(wizard)
    c.next(), c.next(), c.next()
    assert c.step_name == "trial"
    wizard.trial_panel.run_trial_button.click()
    deadline = time.monotonic() + 5
    while len(c.trial_step.points) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not wizard.cancel_button.disabled and wizard.next_button.disabled
    started = time.monotonic()
    wizard.cancel_button.click()
    assert c.wait(2) and time.monotonic() - started < 1.0
    assert c.trial.cancelled and "cancelled" in c.message
    assert len(wizard.trial_figure.data[0].x) >= 1
    assert not wizard_threads() and wizard.cancel_button.disabled


@pytest.mark.timing
@pytest.mark.timeout(60)
def test_real_trial_cancel_leaves_nothing_running(real_wizard: Any, small_demo: S3Endpoint) -> None:
    c = real_wizard.controller
    c.use_demo("small-images")
    assert c.wait(60) and c.profile is not None, c.errors
    c.next(), c.next(), c.next()
    assert c.run_trial(60)
    time.sleep(0.3)
    started = time.monotonic()
    real_wizard.cancel_button.click()
    assert c.wait(15), "the trial did not stop"
    assert time.monotonic() - started < 15
    assert c.trial is not None and not c.busy

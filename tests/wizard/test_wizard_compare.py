"""The wizard's comparison of the user's loader with the recommended one, headless, with the
real session on the small demo: a failed comparison offers "Run again", which re-runs the
comparison alone; going back and forward again does not leave its error behind."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from tests.wizard.conftest import WIDGET_WARNINGS

pytestmark = WIDGET_WARNINGS

# The user's loader: it fails until the file its variable names exists (a setting the user
# fixes), then yields 20 small batches.
USER_MODULE = """
import os, pathlib, time

def make_loader():
    if not pathlib.Path(os.environ["COMPARE_TEST_READY"]).exists():
        raise RuntimeError("the data is not ready yet")
    def batches():
        for i in range(20):
            time.sleep(0.005)
            yield [i] * 8
    return batches()
"""


@pytest.fixture
def walk(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[Any, Path]]:
    """The wizard on the small demo, its workload naming `compare_user:make_loader`, up to
    the recommendation (no trial: the model decides, quicker); and the file that fixes it."""
    from advisor.demo import stop_demo
    from advisor.session import AdvisorSession
    from advisor.wizard.controller import WizardController
    from advisor.wizard.views import Wizard
    from tests.browser.browser_helpers import small_demo_env

    for name, value in small_demo_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # its local copy: in this home's cache
    (tmp_path / "compare_user.py").write_text(USER_MODULE)
    ready = tmp_path / "ready"
    monkeypatch.setenv("COMPARE_TEST_READY", str(ready))
    monkeypatch.syspath_prepend(str(tmp_path))
    stop_demo()
    before = set(threading.enumerate())
    w = Wizard(WizardController(AdvisorSession()))
    c = w.controller
    assert c.use_demo("small-images") and c.wait(60) and c.profile is not None, c.errors
    c.next(), c.next()
    w.workload_panel.samples_per_s.value = "400"
    w.workload_panel.loader.value = "compare_user:make_loader"
    yield w, ready
    c.close()
    sys.modules.pop("compare_user", None)
    stop_demo()
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive() and
                t.name.startswith("loader-advisor-wizard")]  # fmt: skip


def _to_recommendation(w: Any) -> None:
    c = w.controller
    assert c.next() and c.step_name == "trial"
    assert c.next() and c.step_name == "recommendation"
    assert c.wait(90), c.errors


@pytest.mark.timeout(240)
def test_run_again_after_a_failed_comparison(walk: tuple[Any, Path]) -> None:
    w, ready = walk
    c = w.controller
    _to_recommendation(w)
    assert c.recommendation is not None
    assert "the data is not ready yet" in c.errors["recommendation"], c.errors
    assert "the data is not ready yet" in w.error.value
    button = w.recommendation_panel.run_again_button
    assert button.layout.display == "" and not button.disabled
    ready.touch()  # the user fixes it
    trial = c.trial
    button.click()
    assert c.wait(90), c.errors
    assert "recommendation" not in c.errors and w.error.value == ""
    step = c.recommendation_step
    assert step.comparison is not None and step.comparison.speedup is not None
    assert "in your loop" in w.recommendation_panel.headline.value
    assert button.layout.display == "none"
    assert c.trial is trial  # the comparison ran again, not the trial
    # the recommended loader copies the set to local disk first: the headline names the copy
    # with its measured time and rate, where it is, and what the home cache holds now (the
    # failed run made the copy; this one found it up to date and says when it was made)
    assert c.recommendation.data_source == "copy-local"
    copy = step.copy
    assert copy is not None and copy.report is not None and copy.report.copied_bytes > 0
    assert step.changed[0] == copy.change() and "at the measured" in step.changed[0]
    assert not copy.fresh and "made earlier in" in copy.change()
    assert f"Change: {copy.change()}" in w.recommendation_panel.headline.value
    assert "the home cache ~/.cache/loader-advisor holds" in w.recommendation_panel.headline.value


@pytest.mark.timeout(240)
def test_back_and_forward_again_runs_a_failed_comparison_again(walk: tuple[Any, Path]) -> None:
    w, ready = walk
    c = w.controller
    _to_recommendation(w)
    assert "the data is not ready yet" in c.errors["recommendation"], c.errors
    assert c.back() and c.step_name == "trial"
    ready.touch()
    assert c.next() and c.step_name == "recommendation"
    assert c.wait(90), c.errors
    assert "recommendation" not in c.errors and w.error.value == ""  # no stale error
    assert c.recommendation_step.comparison is not None
    # a loader no longer named takes its comparison with it
    c.back(), c.back()
    w.workload_panel.loader.value = ""
    c.next(), c.next()
    assert (
        c.recommendation_step.comparison is None
        and "in your loop" not in w.recommendation_panel.headline.value
    )

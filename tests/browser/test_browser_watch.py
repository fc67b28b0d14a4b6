"""`advisor.watch` in a real JupyterLab in headless Chromium: a training loop in a notebook,
watched live; the screenshot shows the live view (the waiting share over the steps) and the
verdict with the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.browser_helpers import ARTIFACTS, jupyter_lab
from tests.browser.test_browser import SHOTS, _page, _run_all, _wait_kernel_ready, browser  # noqa: F401

pytestmark = pytest.mark.browser

TRAINING_CELL = """import time
import torch
import advisor


class SlowImages(torch.utils.data.Dataset):
    def __len__(self):
        return 1_200

    def __getitem__(self, index):
        time.sleep(0.002)  # a read that waits 2 ms per sample
        return torch.zeros(3, 16, 16)


loader = torch.utils.data.DataLoader(SlowImages(), batch_size=8, num_workers=0)
for batch in advisor.watch(loader, every=10):
    time.sleep(0.01)  # the training step"""


@pytest.mark.timeout(240)
def test_a_training_loop_watched_in_a_notebook_shows_the_live_view_and_verdict(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    root.mkdir()
    import nbformat  # here, not at the top: its import takes seconds that collecting paid

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(TRAINING_CELL)])
    nbformat.write(notebook, root / "train.ipynb")
    log = ARTIFACTS / "jupyterlab-watch.log"
    with jupyter_lab(root, tmp_path / "state", {}, log) as lab, _page(browser, "watch-") as page:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(lab.notebook_url("train.ipynb"))
        _wait_kernel_ready(page, 90_000)
        _run_all(page)
        view = page.locator(".la-watch")
        # live: the headline counts steps while the loop runs, and the chart is drawn
        view.locator(".la-watch-headline", has_text="step").wait_for(timeout=60_000)
        view.locator(".la-watch-chart .js-plotly-plot").wait_for(timeout=30_000)
        # the end: the verdict, the bottleneck and the change with its predicted rate
        live = view.locator(".la-watch-headline").inner_text()
        assert "waiting" in live and "of each step" in live, live
        headline = view.locator(".la-watch-headline", has_text="of each step waits for data")
        headline.wait_for(timeout=90_000)
        assert "input-bound" in headline.inner_text()
        details = view.locator(".la-watch-details").inner_text()
        assert "bottleneck:" in details and "change: num_workers 0 ->" in details, details
        view.screenshot(path=str(SHOTS / "watch-live-view.png"))

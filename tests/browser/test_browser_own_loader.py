"""The own-loader path in a real JupyterLab, in headless Chromium, as a user clicks.

The kernel has no AWS keys and no endpoint of its own (nothing set by hand): the demo's reach
the README's example loader (`examples/tutorial_loader.py`, boto3 in `__getitem__`) because
the wizard points the kernel's AWS variables at the demo while it is in use. A second walk
fails the comparison on purpose (the user's loader raises until a file exists), creates the
file as a user fixes a setting, clicks "Run again", and reaches the before/after headline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from tests.browser.browser_helpers import ARTIFACTS, NOTEBOOK, jupyter_lab, small_demo_env
from tests.browser.test_browser import (
    SHOTS,
    WALK_VIEWPORT,
    _click,
    _page,
    _run_all,
    _step,
    _wait_kernel_ready,
)
from tests.browser.test_browser import browser as browser  # the Chromium fixture, shared

pytestmark = [
    pytest.mark.browser,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # playwright's asyncio internals
]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# what a user has not set: the kernel finds no keys and no endpoint in its environment
NOTHING_SET = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
               "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE")  # fmt: skip
HEADLINE_MS = 180_000


def _root_with(tmp_path: Path, first_cell: str | None = None) -> Path:
    """A folder served by JupyterLab: the wizard's notebook (with `first_cell` before it) and
    the README's example loader beside it, where the kernel's working folder imports it."""
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    notebook = json.loads(NOTEBOOK.read_text())
    if first_cell is not None:
        notebook["cells"].insert(1, {"cell_type": "code", "execution_count": None,
                                     "id": "user-loader", "metadata": {}, "outputs": [],
                                     "source": first_cell})  # fmt: skip
    (root / "notebooks" / "advisor.ipynb").write_text(json.dumps(notebook))
    shutil.copy(EXAMPLES / "tutorial_loader.py", root / "notebooks" / "tutorial_loader.py")
    return root


def _demo_to_workload(page: Any, lab: Any, loader: str) -> Any:
    """Open the notebook, run it, use the demo, and name `loader` in the workload step."""
    page.set_viewport_size(WALK_VIEWPORT)
    page.goto(lab.notebook_url("notebooks/advisor.ipynb"))
    _wait_kernel_ready(page, 90_000)
    _run_all(page)
    dataset = _step(page, "dataset")
    _click(page, "la-btn-demo")
    dataset.locator(".la-profile-summary", has_text="objects").wait_for(timeout=90_000)
    _click(page, "la-btn-next")
    _step(page, "hardware").locator(".la-hardware-summary", has_text="CPU cores").wait_for()
    _click(page, "la-btn-next")
    workload = _step(page, "workload")
    workload.locator(".la-input-rate input").fill("300")
    workload.locator(".la-input-loader input").fill(loader)
    workload.locator(".la-field-errors", has_text="one GPU consumes 300").wait_for()
    return workload


@pytest.mark.timeout(420)
def test_the_readme_loader_on_the_demo_reaches_the_before_after_headline(
    browser: Any, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = _root_with(tmp_path)
    env = small_demo_env(s3_endpoint)
    log = ARTIFACTS / "jupyterlab-own-loader.log"
    with (
        jupyter_lab(root, tmp_path / "state", env, log, unset=NOTHING_SET) as lab,
        _page(browser, "own-loader-") as page,
    ):
        workload = _demo_to_workload(page, lab, "tutorial_loader:make_loader")
        # the step says, in one line, that the kernel's AWS variables point at the demo
        note = workload.locator(".la-demo-env")
        note.get_by_text("AWS_ENDPOINT_URL").wait_for()
        assert s3_endpoint.credentials.secret_key not in note.inner_text()
        page.screenshot(path=str(SHOTS / "own-loader-3-workload.png"))
        _click(page, "la-btn-next")
        trial = _step(page, "trial")
        trial.locator(".la-input-trial-seconds input").fill("5")
        trial.locator(".la-input-trial-seconds input").press("Tab")
        _click(page, "la-btn-run-trial")
        trial.locator(".la-status-slot .la-status", has_text="trial done").wait_for(timeout=120_000)
        _click(page, "la-btn-next")
        headline = _step(page, "recommendation").locator(".la-headline")
        mine = headline.locator("div", has_text="in your loop").first
        error = page.locator(".la-wizard .la-error-box", has_text="your loader")
        mine.or_(error).first.wait_for(timeout=HEADLINE_MS)
        assert not error.count(), error.inner_text()
        text = headline.inner_text()
        assert "Your loader -> the recommended one, in your loop: " in text, text
        assert "samples/s (" in text and "data wait" in text, text
        # the made DataLoader's settings, compared with the recommended ones: its 0 workers
        # against the count the recommendation's card shows (a short trial on 2 cores may keep
        # 0 where a spinning step holds one of them; then only the reader changes)
        card = _step(page, "recommendation").locator(
            ".la-card .la-card-title", has_text="num_workers"
        )
        workers = int(card.first.locator(".la-value").inner_text().split()[0])
        if workers > 0:
            assert f"num_workers 0 -> {workers}" in text, text
        else:
            assert "num_workers 0 ->" not in text and ", the native reader." in text, text
        # the recommended loader copies the demo set to local disk first: the copy leads the
        # changes, with its size and the time and rate measured as it ran, then where it is
        # and what the home cache holds
        assert text.startswith("Change: copy ") and "to local disk first (" in text, text
        assert "at the measured" in text and "MiB/s" in text and "200 MB/s" not in text, text
        assert "The local copy is in " in text and "the home cache " in text, text
        page.screenshot(path=str(SHOTS / "own-loader-5-recommendation.png"))


# The user's loader, defined in the notebook: it raises until the file `ready` exists in the
# kernel's working folder (a setting the user fixes), then reads 64 small samples.
FLAKY_LOADER_CELL = """import pathlib
import time
import torch


class NotReadyYet(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        if not pathlib.Path("ready").exists():
            raise RuntimeError("the data is not ready yet")
        time.sleep(0.005)
        return torch.zeros(3, 16, 16)


my_loader = torch.utils.data.DataLoader(NotReadyYet(), batch_size=16, num_workers=0)"""


@pytest.mark.timeout(420)
def test_a_failed_comparison_runs_again_from_its_button(
    browser: Any, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = _root_with(tmp_path, FLAKY_LOADER_CELL)
    env = small_demo_env(s3_endpoint)
    log = ARTIFACTS / "jupyterlab-run-again.log"
    with (
        jupyter_lab(root, tmp_path / "state", env, log, unset=NOTHING_SET) as lab,
        _page(browser, "run-again-") as page,
    ):
        _demo_to_workload(page, lab, "my_loader")
        _click(page, "la-btn-next")
        _step(page, "trial")
        _click(page, "la-btn-next")  # no trial: the model decides, and the comparison runs
        recommendation = _step(page, "recommendation")
        error = page.locator(".la-wizard .la-error-box", has_text="the data is not ready yet")
        error.wait_for(timeout=HEADLINE_MS)
        again = recommendation.locator("button.la-btn-run-again")
        again.wait_for(state="visible")
        page.screenshot(path=str(SHOTS / "run-again-1-failed.png"))
        (root / "notebooks" / "ready").touch()  # the user fixes what was wrong
        _click(page, "la-btn-run-again")
        headline = recommendation.locator(".la-headline")
        headline.locator("div", has_text="in your loop").first.wait_for(timeout=HEADLINE_MS)
        assert not error.count()  # the error from before is gone
        assert not again.is_visible()
        assert "Your loader -> the recommended one, in your loop: " in headline.inner_text()
        page.screenshot(path=str(SHOTS / "run-again-2-succeeded.png"))

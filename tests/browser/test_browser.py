"""End to end: the wizard notebook in a real JupyterLab, in headless Chromium, as a user clicks.

JupyterLab serves a temporary copy of notebooks/advisor.ipynb; its kernel finds a small demo
data set on the test endpoint through LOADER_ADVISOR_DEMO_*. The test runs all cells, clicks
through the six steps (demo, profile, hardware, workload, a short trial, recommendation, save),
screenshots each step into test-artifacts/, and imports the saved module in a subprocess to take
one batch from it. A shorter test opens the same notebook in classic Notebook 7 and goes as far
as the hardware step: the widgets, plotly output and step buttons work there as well.

Two tests take the user's own paths with nothing prepared: a JupyterLab without any demo
variables, where the kernel starts the demo endpoint itself, once through the notebook's
**Use demo dataset** and once through `%load_ext advisor` + `%advisor --demo` typed into a new
notebook; each runs a real trial, saves, and loads a batch from the saved module elsewhere.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.server import S3Credentials, S3Endpoint
from tests.browser.browser_helpers import (
    ARTIFACTS,
    NOTEBOOK,
    check_export_yields_batch,
    jupyter_lab,
    small_demo_env,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # playwright's asyncio internals
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    "--disable-extensions", "--disable-default-apps",
]  # fmt: skip
SHOTS = ARTIFACTS / "browser"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


def _luminance(css_colour: str) -> float:
    """Relative brightness in [0, 1] of an "rgb(r, g, b)" / "rgba(...)" computed colour."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css_colour)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def _shot(page: Any, name: str) -> None:
    page.locator(".la-wizard").screenshot(path=str(SHOTS / f"{name}.png"))


# Where each app shows that the kernel is idle: JupyterLab's status bar; Notebook 7 has no
# status bar, its notebook toolbar carries the execution indicator with the kernel's status.
LAB_IDLE = (".jp-StatusBar-TextItem", "Idle")
NOTEBOOK7_IDLE = (
    ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']",
    None,
)


def _wait_kernel_ready(
    page: Any, timeout_ms: int, idle_indicator: tuple[str, str | None] = LAB_IDLE
) -> None:
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").wait_for(timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    idle_css, idle_text = idle_indicator
    while time.monotonic() < deadline:
        dialog = page.locator(".jp-Dialog")
        if dialog.count() and "Select Kernel" in dialog.inner_text():
            dialog.locator("button.jp-mod-accept").click()
        name = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar-kernelName")
        idle = page.locator(idle_css, has_text=idle_text)
        if name.count() and "Python 3" in name.first.inner_text() and idle.count():
            return
        time.sleep(0.3)
    raise AssertionError("the kernel did not become idle")


def _run_all(page: Any) -> None:
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.click()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()


def _click(page: Any, css: str) -> None:
    button = page.locator(f".la-wizard button.{css}")
    button.wait_for(state="visible")
    page.wait_for_function(
        "sel => { const b = document.querySelector(sel); return b && !b.disabled; }",
        arg=f".la-wizard button.{css}",
    )
    button.click()


def _step(page: Any, name: str) -> Any:
    step = page.locator(f".la-wizard .la-step-{name}")
    step.wait_for(state="visible")
    return step


def _profile_demo_then_hardware(page: Any, dataset: Any, shot_prefix: str = "") -> Any:
    """Profile the demo data set from the dataset step, go on to the hardware step; returns it."""
    _click(page, "la-btn-demo")
    dataset.locator(".la-profile-summary", has_text="objects").wait_for(timeout=90_000)
    dataset.locator(".la-chart-sizes .js-plotly-plot").wait_for()
    assert "loader-advisor-demo" in page.locator(".la-input-uri input").input_value()
    _shot(page, f"{shot_prefix}1-dataset-profiled")
    _click(page, "la-btn-next")
    hardware = _step(page, "hardware")
    hardware.locator(".la-hardware-summary", has_text="CPU cores").wait_for()
    _shot(page, f"{shot_prefix}2-hardware")
    return hardware


@pytest.mark.timeout(240)
def test_wizard_end_to_end_in_jupyterlab(
    browser: Any, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, root / "notebooks" / "advisor.ipynb")
    env = small_demo_env(s3_endpoint)
    with jupyter_lab(root, tmp_path / "state", env, ARTIFACTS / "jupyterlab.log") as lab:
        page = browser.new_page(viewport={"width": 1280, "height": 1800})
        page.set_default_timeout(60_000)
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        try:
            page.goto(lab.notebook_url("notebooks/advisor.ipynb"))
            _wait_kernel_ready(page, 90_000)
            _run_all(page)
            dataset = _step(page, "dataset")
            page.locator(".la-wizard .la-input-uri input").wait_for()
            _shot(page, "1-dataset")

            # 1 Dataset: a bad URI is explained inline, then the demo data set is profiled.
            page.locator(".la-wizard .la-input-uri input").fill("gs://nowhere/data/")
            _click(page, "la-btn-profile")
            page.locator(".la-wizard .la-error-box", has_text="unsupported URI scheme").wait_for()
            # 1 Dataset: the demo; 2 Hardware
            hardware = _profile_demo_then_hardware(page, dataset)
            hardware.locator(".la-input-target-gpu select").select_option("A100-80GB")
            hardware.locator(".la-gpu", has_text="A100-80GB").wait_for()
            _shot(page, "2-hardware-planned")

            # 3 Workload: an invalid number is shown inline, then corrected.
            _click(page, "la-btn-next")
            workload = _step(page, "workload")
            workload.locator(".la-input-rate input").fill("lots")
            workload.locator(".la-field-errors", has_text="must be a number").wait_for()
            workload.locator(".la-input-rate input").fill("200")
            workload.locator(".la-field-errors .la-error").wait_for(state="detached")
            _shot(page, "3-workload")

            # 4 Live trial, short budget; the chart fills in.
            _click(page, "la-btn-next")
            trial = _step(page, "trial")
            trial.locator(".la-input-trial-seconds input").fill("3")
            trial.locator(".la-input-trial-seconds input").press("Tab")
            _click(page, "la-btn-run-trial")
            page.locator(
                ".la-wizard .la-status", has_text=re.compile("trial (done|cancelled)")
            ).wait_for(timeout=90_000)
            trial.locator(".la-chart-trial .js-plotly-plot").wait_for()
            _shot(page, "4-trial")

            # 5 Recommendation: cards, supply chart and the decision flow.
            _click(page, "la-btn-next")
            recommendation = _step(page, "recommendation")
            recommendation.locator(".la-card").first.wait_for()
            recommendation.locator(".la-chart-supply .js-plotly-plot").wait_for()
            assert recommendation.locator(".la-card", has_text="num_workers").count() >= 1
            # the rules and the flow sit behind Details; JupyterLab's Mermaid renderer draws the
            # flow when opened, at a readable size, the taken path with the "taken" class.
            assert not recommendation.locator(".la-flow .jp-RenderedMermaid").count()
            recommendation.locator("button.la-btn-details").click()
            diagram = recommendation.locator(".la-flow .jp-RenderedMermaid :is(svg, img)").first
            diagram.wait_for()
            drawn = diagram.evaluate("e => e.outerHTML")
            assert "taken" in drawn and "SRC" in drawn  # the highlighted path is in the drawing
            recommendation.locator(".la-path .la-taken").first.wait_for()
            scale = diagram.evaluate(
                "e => { const w = e.getBoundingClientRect().width;"
                " const natural = e.tagName === 'IMG' ? e.naturalWidth"
                " : (e.viewBox && e.viewBox.baseVal && e.viewBox.baseVal.width);"
                " return natural ? w / natural : -1; }"
            )
            assert scale > 0.9, scale  # drawn at its own size, not shrunk to unreadable text
            # the diagram's box scrolls to the path taken: its first node is inside the box
            page.wait_for_function(
                "() => { const box = document.querySelector('.la-wizard .la-flow "
                ".jp-RenderedMermaid figure'); if (!box || !box.dataset.laPathY) return false;"
                " const y = Number(box.dataset.laPathY) - box.scrollTop;"
                " return box.scrollTop > 0 && y >= 0 && y < box.clientHeight; }",
                timeout=10_000,
            )
            _shot(page, "5-recommendation")

            # 6 Export: preview, save next to the notebook, download link.
            _click(page, "la-btn-next")
            export = _step(page, "export")
            export.locator(".la-preview-module pre", has_text="make_dataloader").wait_for()
            export.locator(".la-input-stem input").fill("browser_loader")
            _click(page, "la-btn-save")
            export.locator(".la-saved", has_text="browser_loader.py").wait_for()
            href = export.locator(".la-download a").first.get_attribute("href")
            assert href and href.startswith("data:text/x-python;base64,")
            _shot(page, "6-export")
            page.screenshot(path=str(SHOTS / "full-page.png"), full_page=True)

            # The same wizard in the dark theme: JupyterLab's colours, no white panels.
            page.get_by_role("menuitem", name="Settings", exact=True).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).hover()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
            page.wait_for_function("document.body.dataset.jpThemeLight === 'false'")
            for css in (".la-wizard", ".la-wizard .la-pre"):
                # the theme's stylesheet applies a moment after the attribute flips
                deadline = time.monotonic() + 15
                while True:
                    colour = page.locator(css).first.evaluate(
                        "e => getComputedStyle(e).backgroundColor"
                    )
                    if _luminance(colour) < 0.35 or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                assert _luminance(colour) < 0.35, f"{css} background {colour} in the dark theme"
            _shot(page, "6-export-dark")
            errors = [line for line in console if line.startswith("error")]
            assert not errors, errors
        finally:  # what the page looked like at the end (or at a failure), and its console
            page.screenshot(path=str(SHOTS / "last.png"), full_page=True)
            (SHOTS / "console.log").write_text("\n".join(console))
            page.close()
    module = root / "notebooks" / "browser_loader.py"
    assert module.exists() and module.with_suffix(".json").exists()
    assert check_export_yields_batch(module, s3_endpoint).startswith("BATCH")


@pytest.mark.timeout(180)
def test_wizard_profiles_demo_in_notebook7(
    browser: Any, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """Classic Notebook 7 (one notebook per page, no status bar): run all cells, profile the demo
    data set, see its size histogram, and reach the hardware step."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, root / "notebooks" / "advisor.ipynb")
    env = small_demo_env(s3_endpoint)
    log = ARTIFACTS / "notebook7.log"
    with jupyter_lab(root, tmp_path / "state", env, log, app="notebook") as server:
        page = browser.new_page(viewport={"width": 1280, "height": 1800})
        page.set_default_timeout(60_000)
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        try:
            page.goto(server.notebook_url("notebooks/advisor.ipynb"))
            _wait_kernel_ready(page, 90_000, NOTEBOOK7_IDLE)
            _run_all(page)
            dataset = _step(page, "dataset")
            page.locator(".la-wizard .la-input-uri input").wait_for()

            _profile_demo_then_hardware(page, dataset, shot_prefix="nb7-")
            errors = [line for line in console if line.startswith("error")]
            assert not errors, errors
        finally:  # what the page looked like at the end (or at a failure), and its console
            page.screenshot(path=str(SHOTS / "nb7-last.png"), full_page=True)
            (SHOTS / "nb7-console.log").write_text("\n".join(console))
            page.close()


# --- the user's own paths: nothing prepared, the kernel starts the demo endpoint itself --------

DEMO_START_MS = 240_000  # the full demo data set is generated in the kernel (~1 min here)


def _kernel_endpoint(page: Any) -> S3Endpoint:
    """The demo endpoint the kernel started, as the dataset step shows it, with the credentials
    the kernel inherited (the test session's dummy ones)."""
    url = page.locator(".la-wizard .la-input-endpoint input").input_value()
    assert url.startswith("http://127.0.0.1:"), url
    return S3Endpoint(url, S3Credentials.from_env_or_dummy())


def _measured_points(page: Any) -> int:
    """Points with a measured rate (> 0 samples/s) in the trial chart's plotly traces."""
    return int(
        page.locator(".la-wizard .la-chart-trial .js-plotly-plot").first.evaluate(
            "e => e.data.filter(t => t.type === 'scatter')"
            ".reduce((n, t) => n + (t.y || []).filter(v => v > 0).length, 0)"
        )
    )


def _trial_to_save(page: Any, stem: str, prefix: str) -> None:
    """From the hardware step: workload, a real short trial whose chart fills with measured
    points, the recommendation, and Save."""
    _click(page, "la-btn-next")
    workload = _step(page, "workload")
    workload.locator(".la-input-rate input").fill("200")
    _click(page, "la-btn-next")
    trial = _step(page, "trial")
    trial.locator(".la-input-trial-seconds input").fill("4")
    trial.locator(".la-input-trial-seconds input").press("Tab")
    _click(page, "la-btn-run-trial")
    done = page.locator(".la-wizard .la-status", has_text="trial done")
    error = page.locator(".la-wizard .la-error-box", has_text=re.compile(r"\S"))
    done.or_(error).first.wait_for(timeout=120_000)  # an error (no endpoint) ends the wait too
    assert not error.count(), error.inner_text()
    trial.locator(".la-chart-trial .js-plotly-plot").wait_for()
    page.wait_for_function(  # the chart re-renders after the last point; wait for its data
        "() => { const e = document.querySelector('.la-wizard .la-chart-trial .js-plotly-plot');"
        " return e && e.data && e.data.some(t => (t.y || []).some(v => v > 0)); }"
    )
    assert _measured_points(page) >= 1
    _shot(page, f"{prefix}4-trial")
    _click(page, "la-btn-next")
    _step(page, "recommendation").locator(".la-card").first.wait_for()
    _shot(page, f"{prefix}5-recommendation")
    _click(page, "la-btn-next")
    export = _step(page, "export")
    export.locator(".la-input-stem input").fill(stem)
    _click(page, "la-btn-save")
    export.locator(".la-saved", has_text=f"{stem}.py").wait_for()
    _shot(page, f"{prefix}6-export")


@contextmanager
def _page(browser: Any, prefix: str) -> Iterator[Any]:
    """A fresh page; at the end (or a failure) its screenshot and console land in SHOTS, and
    the console must hold no error."""
    page = browser.new_page(viewport={"width": 1280, "height": 1800})
    page.set_default_timeout(60_000)
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    try:
        yield page
        errors = [line for line in console if line.startswith("error")]
        assert not errors, errors
    finally:
        page.screenshot(path=str(SHOTS / f"{prefix}last.png"), full_page=True)
        (SHOTS / f"{prefix}console.log").write_text("\n".join(console))
        page.close()


@pytest.mark.timeout(420)
def test_wizard_starts_its_own_demo_in_a_plain_jupyterlab(browser: Any, tmp_path: Path) -> None:
    """JupyterLab started by hand, no demo variables: Use demo dataset starts the endpoint in the
    kernel's worker thread; the trial, the save and a fresh process still reach it."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, root / "notebooks" / "advisor.ipynb")
    log = ARTIFACTS / "jupyterlab-own-demo.log"
    with jupyter_lab(root, tmp_path / "state", {}, log) as lab, _page(browser, "own-") as page:
        page.goto(lab.notebook_url("notebooks/advisor.ipynb"))
        _wait_kernel_ready(page, 90_000)
        _run_all(page)
        dataset = _step(page, "dataset")
        _click(page, "la-btn-demo")
        dataset.locator(".la-profile-summary", has_text="objects").wait_for(timeout=DEMO_START_MS)
        _shot(page, "own-1-dataset-profiled")
        endpoint = _kernel_endpoint(page)
        _click(page, "la-btn-next")
        _step(page, "hardware").locator(".la-hardware-summary").wait_for()
        _trial_to_save(page, "own_demo_loader", "own-")
        module = root / "notebooks" / "own_demo_loader.py"
        # while the kernel (and with it the endpoint) lives, a fresh process loads a batch
        assert check_export_yields_batch(module, endpoint).startswith("BATCH")


@pytest.mark.timeout(420)
def test_magic_demo_typed_into_a_new_notebook(browser: Any, tmp_path: Path) -> None:
    """A new notebook from the launcher, `%load_ext advisor` and `%advisor --demo` typed in:
    the demo starts in the kernel, then the six steps, a trial, Save and a batch elsewhere."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    root.mkdir()
    log = ARTIFACTS / "jupyterlab-magic.log"
    with jupyter_lab(root, tmp_path / "state", {}, log) as lab, _page(browser, "magic-") as page:
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        page.locator(".jp-LauncherCard[data-category='Notebook']").first.click()
        _wait_kernel_ready(page, 90_000)
        editor = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell .cm-content")
        editor.first.click()
        page.keyboard.type("%load_ext advisor")
        page.keyboard.press("Shift+Enter")
        editor.nth(1).wait_for()
        page.keyboard.type("%advisor --demo")
        page.keyboard.press("Shift+Enter")
        dataset = _step(page, "dataset")
        dataset.locator(".la-profile-summary", has_text="objects").wait_for(timeout=DEMO_START_MS)
        assert "small-images" in page.locator(".la-input-uri input").input_value()
        _shot(page, "magic-1-dataset-profiled")
        endpoint = _kernel_endpoint(page)
        _click(page, "la-btn-next")
        _step(page, "hardware").locator(".la-hardware-summary").wait_for()
        _trial_to_save(page, "magic_loader", "magic-")
        assert check_export_yields_batch(root / "magic_loader.py", endpoint).startswith("BATCH")


# --- a new user's walk at a laptop's window: each step's top in view, the chart, the headline ----

WALK_VIEWPORT = {"width": 1280, "height": 900}
# the user's own loader, defined in the notebook before the wizard: ~100 samples/s, no workers
USER_LOADER_CELL = """import time
import torch


class SlowImages(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, index):
        time.sleep(0.01)  # a decode that takes 10 ms per sample
        return torch.zeros(3, 16, 16)


my_loader = torch.utils.data.DataLoader(SlowImages(), batch_size=16, num_workers=0)"""


def _top_in_view(page: Any, name: str) -> None:
    """The step's top is inside the window, as the user sees it without scrolling."""
    page.wait_for_function(
        "sel => { const e = document.querySelector(sel); if (!e) return false;"
        " const top = e.getBoundingClientRect().top; return top >= 0 && top < innerHeight / 2; }",
        arg=f".la-wizard .la-step-{name}",
        timeout=10_000,
    )


def _view(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"walk-{name}.png"))  # the window: what the user sees


@pytest.mark.timeout(300)
def test_walk_at_1280x900_sees_every_step_and_leads_with_the_answer(
    browser: Any, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """Demo data, a 1280x900 window, no scrolling by hand: after every Next the step's top is in
    view; the trial chart has one point per count and a legend; the user's own loader, named in
    the workload, and the exported one run through the same loop and their before/after/ratio
    leads the recommendation's headline; a reached step opens again from its pill."""
    import json

    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    notebook = json.loads(NOTEBOOK.read_text())
    loader_cell = {"cell_type": "code", "execution_count": None, "id": "user-loader",
                   "metadata": {}, "outputs": [], "source": USER_LOADER_CELL}  # fmt: skip
    notebook["cells"].insert(1, loader_cell)
    (root / "notebooks" / "advisor.ipynb").write_text(json.dumps(notebook))
    env = small_demo_env(s3_endpoint)
    log = ARTIFACTS / "jupyterlab-walk.log"
    with jupyter_lab(root, tmp_path / "state", env, log) as lab:
        page = browser.new_page(viewport=WALK_VIEWPORT)
        page.set_default_timeout(60_000)
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        try:
            page.goto(lab.notebook_url("notebooks/advisor.ipynb"))
            _wait_kernel_ready(page, 90_000)
            _run_all(page)
            dataset = _step(page, "dataset")
            _click(page, "la-btn-demo")
            # the progress shows beside the button that started it
            dataset.locator(".la-status-slot .la-status-row").wait_for()
            dataset.locator(".la-profile-summary", has_text="objects").wait_for(timeout=90_000)
            _view(page, "1-dataset")

            for name in ("hardware", "workload"):
                _click(page, "la-btn-next")
                _step(page, name)
                _top_in_view(page, name)
                _view(page, f"{2 if name == 'hardware' else 3}-{name}")
                assert not page.locator(".la-wizard .la-status-row:visible").count()  # not stale
            workload = _step(page, "workload")
            workload.locator(".la-input-rate input").fill("200")
            workload.locator(".la-input-loader input").fill("my_loader")
            workload.locator(".la-field-errors", has_text="one GPU consumes 200").wait_for()

            _click(page, "la-btn-next")
            trial = _step(page, "trial")
            _top_in_view(page, "trial")
            trial.locator(".la-input-trial-seconds input").fill("10")
            trial.locator(".la-input-trial-seconds input").press("Tab")
            _click(page, "la-btn-run-trial")
            status = trial.locator(".la-status-slot .la-status", has_text="left")
            status.wait_for()
            # a long status wraps onto a second line, never cut ("num_workers=0 (a blo")
            cut = "e => [e, ...e.querySelectorAll('*')].some(c => c.scrollWidth > c.clientWidth)"
            assert not status.evaluate(cut), status.inner_text()
            trial.locator(".la-status-slot .la-status", has_text="trial done").wait_for(
                timeout=120_000
            )
            page.wait_for_function(
                "() => { const e = document.querySelector('.la-wizard .la-chart-trial "
                ".js-plotly-plot'); return e && e.data && e.data.some(t => (t.y || []).length); }"
            )
            traces = page.locator(".la-wizard .la-chart-trial .js-plotly-plot").first.evaluate(
                "e => e.data.map(t => ({name: t.name, x: t.x, y: t.y}))"
            )
            points = [t for t in traces if "consumes" not in t["name"]]
            counts = [x for t in points for x in t["x"]]
            assert counts and len(counts) == len(set(counts)), traces  # one point per count
            assert any("training consumes 200 samples/s" in t["name"] for t in traces)
            trial.locator(".la-chart-trial .legend").wait_for()
            _view(page, "4-trial")

            _click(page, "la-btn-next")
            recommendation = _step(page, "recommendation")
            _top_in_view(page, "recommendation")
            headline = recommendation.locator(".la-headline")
            headline.locator("b", has_text="Change:").wait_for()
            # the user's loader and the exported one, interleaved in the same loop, lead
            headline.locator("div", has_text="in your loop").first.wait_for(timeout=150_000)
            text = headline.inner_text()
            assert "Your loader -> the recommended one, in your loop: " in text, text
            assert "samples/s (" in text and "x" in text and "data wait" in text, text
            assert "Your loader's bottleneck: " in text, text
            # the evidence and the rules are folded; the diagram waits behind Details
            assert not recommendation.locator("details[open]").count()
            assert not recommendation.locator(".la-flow .jp-RenderedMermaid").count()
            _view(page, "5-recommendation")
            # the wizard as the window shows it (the README's picture, docs/images/wizard.png)
            box = page.locator(".la-wizard").bounding_box()
            assert box is not None
            clip = {"x": box["x"], "y": max(0.0, box["y"]), "width": box["width"],
                    "height": WALK_VIEWPORT["height"] - max(0.0, box["y"]) - 30}  # fmt: skip
            page.screenshot(path=str(SHOTS / "walk-wizard.png"), clip=clip)

            _click(page, "la-btn-next")
            _step(page, "export").locator(".la-preview-module pre").wait_for()
            _top_in_view(page, "export")  # the short step after the long one: no blank page
            _view(page, "6-export")

            page.locator(".la-wizard button.la-pill", has_text="4 Live trial").click()
            _top_in_view(page, "trial")  # a reached step opens again from its pill
            errors = [line for line in console if line.startswith("error")]
            assert not errors, errors
        finally:
            page.screenshot(path=str(SHOTS / "walk-last.png"), full_page=True)
            (SHOTS / "walk-console.log").write_text("\n".join(console))
            page.close()


@pytest.mark.timeout(240)
def test_a_local_folder_shows_no_s3_only_cards(browser: Any, tmp_path: Path) -> None:
    """A folder of JPEGs on this machine: the recommendation shows no card that acts on S3
    requests or object layout (shard size, key prefixes, requests or bytes in flight)."""
    from advisor.demo.datasets import write_folder
    from tests.browser.browser_helpers import SMALL_DEMO

    SHOTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, root / "notebooks" / "advisor.ipynb")
    folder = write_folder(tmp_path / "data", SMALL_DEMO)["small-images"]
    log = ARTIFACTS / "jupyterlab-local.log"
    with jupyter_lab(root, tmp_path / "state", {}, log) as lab, _page(browser, "local-") as page:
        page.set_viewport_size(WALK_VIEWPORT)
        page.goto(lab.notebook_url("notebooks/advisor.ipynb"))
        _wait_kernel_ready(page, 90_000)
        _run_all(page)
        dataset = _step(page, "dataset")
        page.locator(".la-wizard .la-input-uri input").fill(folder)
        _click(page, "la-btn-profile")
        dataset.locator(".la-profile-summary", has_text="objects").wait_for(timeout=60_000)
        for name in ("hardware", "workload", "trial", "recommendation"):
            _click(page, "la-btn-next")
            _step(page, name)
            _top_in_view(page, name)
            if name == "workload":
                page.locator(".la-wizard .la-input-rate input").fill("200")
        recommendation = _step(page, "recommendation")
        recommendation.locator(".la-card").first.wait_for()
        titles = recommendation.locator(".la-card .la-card-title").all_inner_texts()
        assert any(t.startswith("num_workers") for t in titles), titles
        for s3_only in ("shard size", "key prefixes", "requests in flight", "bytes in flight"):
            assert not any(t.startswith(s3_only) for t in titles), titles
        _view(page, "local-5-recommendation")

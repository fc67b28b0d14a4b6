"""The README's picture of the wizard, taken as a new user meets it (not a test).

JupyterLab on the wizard's notebook, with nothing set by hand: **Use demo dataset** starts the
demo in the kernel, the Workload step gets a 300 samples/s GPU and the README's example loader
(`examples/tutorial_loader.py`), a 30 s live trial runs, and the Recommendation step's
before/after headline is shot at 1280x900 as the window shows it:

    python -m tests.browser.readme_image            # writes docs/images/wizard.png

The demo's generated data is read from the user's demo cache (~/.cache/loader-advisor/demo),
so only the first run ever generates it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from advisor.core.homecache import demo_root
from tests.browser.browser_helpers import ARTIFACTS, ROOT, jupyter_lab
from tests.browser.test_browser import CHROMIUM, CHROMIUM_ARGS, WALK_VIEWPORT, _click, _step
from tests.browser.test_browser_own_loader import NOTHING_SET, _demo_to_workload, _root_with

HEADLINE_MS = 300_000


def take(out: Path, trial_seconds: int) -> str:
    """Walk the wizard and write the Recommendation step's picture to `out`; its headline."""
    with tempfile.TemporaryDirectory(prefix="readme-image-") as tmp:
        root = _root_with(Path(tmp))
        env = {"LOADER_ADVISOR_DEMO_CACHE": str(demo_root())}
        log = ARTIFACTS / "jupyterlab-readme-image.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with (
            jupyter_lab(root, Path(tmp) / "state", env, log, unset=NOTHING_SET) as lab,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page(viewport=WALK_VIEWPORT)
            page.set_default_timeout(120_000)
            _demo_to_workload(page, lab, "tutorial_loader:make_loader")  # 300 samples/s
            _click(page, "la-btn-next")
            trial = _step(page, "trial")
            trial.locator(".la-input-trial-seconds input").fill(str(trial_seconds))
            trial.locator(".la-input-trial-seconds input").press("Tab")
            _click(page, "la-btn-run-trial")
            trial.locator(".la-status-slot .la-status", has_text="trial done").wait_for(
                timeout=(trial_seconds + 120) * 1000
            )
            _click(page, "la-btn-next")
            headline = _step(page, "recommendation").locator(".la-headline")
            headline.locator("div", has_text="in your loop").first.wait_for(timeout=HEADLINE_MS)
            page.locator(".la-wizard").evaluate("e => e.scrollIntoView()")
            box = page.locator(".la-wizard").bounding_box()
            assert box is not None
            top = max(0.0, box["y"])
            clip = {"x": box["x"], "y": top, "width": box["width"],
                    "height": WALK_VIEWPORT["height"] - top - 30}  # fmt: skip
            page.screenshot(path=str(out), clip=clip)
            text: str = headline.inner_text()
            browser.close()
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.browser.readme_image", description=__doc__
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "wizard.png")
    parser.add_argument("--trial-seconds", type=int, default=30)
    args = parser.parse_args()
    print(take(args.out, args.trial_seconds))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""The wizard notebook runs top to bottom with nbclient, as the user opens it and driven.

The notebook holds the wizard and its explanation only. The headless check adds a cell of its
own after the wizard's (`HEADLESS_CELL`) that drives the shown wizard from code: demo ->
profile -> short trial -> recommendation -> export, on a small demo data set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from advisor.demo.server import S3Endpoint
from testing.kernels import ipc_kernels
from tests.browser.browser_helpers import NOTEBOOK, check_export_yields_batch, small_demo_env

if TYPE_CHECKING:
    import nbformat

# nbformat and nbclient are imported by the tests that run a notebook: importing nbformat takes
# seconds of CPU (its schema validator), which every pytest process that collects this module
# paid, the `timing` pass and `make check`'s, which run none of these tests, included.

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # jupyter_client/zmq internals
]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


HEADLESS_CELL = """
import os
c = wizard.controller
assert c.use_demo("small-images") and c.wait(120), c.errors
assert c.profile is not None, c.errors
assert c.next() and c.next(), c.errors  # -> hardware -> workload
c.workload_step.form.samples_per_s = "200"
assert c.next(), c.errors  # -> trial
assert c.run_trial(seconds=3) and c.wait(60), c.errors
assert c.next() and c.recommendation is not None, c.errors  # -> recommendation
assert c.next() and c.export_step.bundle is not None, c.errors  # -> export
assert c.save(os.environ["LOADER_ADVISOR_HEADLESS_OUT"], "headless_config"), c.errors
print("steps done:", c.step_name, "| points:", len(c.trial_step.points))
"""


def _run(
    env: dict[str, str], cwd: Path, timeout: int = 60, extra: str = ""
) -> nbformat.NotebookNode:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    if extra:
        notebook.cells.append(nbformat.v4.new_code_cell(extra))
    with ipc_kernels() as config:
        client = NotebookClient(
            notebook,
            config=config,
            kernel_name="python3",
            timeout=timeout,
            resources={"metadata": {"path": cwd}},
        )
        client.execute(env={**os.environ, **env})
    return notebook


def _outputs(notebook: nbformat.NotebookNode) -> list[dict[str, object]]:
    return [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]


@pytest.mark.timeout(120)
def test_notebook_shows_the_wizard_without_blocking(tmp_path: Path) -> None:
    notebook = _run({}, tmp_path)
    outputs = _outputs(notebook)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs)  # type: ignore[operator]
    # what the user opens: the explanation and the wizard, no test code
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert len(code) == 1 and "show()" in code[0].source


@pytest.mark.timeout(180)
def test_notebook_headless_demo_end_to_end(tmp_path: Path, s3_endpoint: S3Endpoint) -> None:
    env = small_demo_env(s3_endpoint)
    env.update(LOADER_ADVISOR_HEADLESS_OUT=str(tmp_path / "out"))
    notebook = _run(env, tmp_path, extra=HEADLESS_CELL)
    text = "".join(str(o.get("text", "")) for o in _outputs(notebook))
    assert "steps done: export" in text, text
    module = tmp_path / "out" / "headless_config.py"
    assert module.exists() and (tmp_path / "out" / "headless_config.json").exists()
    assert check_export_yields_batch(module, s3_endpoint).startswith("BATCH")


@pytest.mark.timeout(120)
def test_magic_shows_a_prefilled_wizard(tmp_path: Path) -> None:
    cells = [
        "%load_ext advisor",
        "%advisor s3://loader-advisor-demo/small-images/ --endpoint-url http://127.0.0.1:9",
        "%advisor --help",
        "%advisor --no-such-option",
    ]
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    with ipc_kernels() as config:
        NotebookClient(notebook, config=config, kernel_name="python3", timeout=60).execute(
            cwd=str(tmp_path)
        )
    outputs = [cell.outputs for cell in notebook.cells]
    assert not [o for cell in outputs for o in cell if o.get("output_type") == "error"]
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs[1])
    assert "--endpoint-url" in "".join(str(o.get("text", "")) for o in outputs[2])
    assert "unrecognized arguments" in "".join(str(o.get("text", "")) for o in outputs[3])
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    values = {m["state"].get("value") for m in state.values() if "la-input-uri" in str(m)}
    assert values == {"s3://loader-advisor-demo/small-images/"}
    assert any(m["state"].get("value") == "http://127.0.0.1:9" for m in state.values())

"""The wheel as a user installs it: built by `pip wheel .`, installed into a fresh virtualenv.

With the runtime tier alone (no extras) the CLI runs, recommends on a local folder and exports a
DataLoader module that iterates with `advisor` unimportable (training needs only `native_loader`
and torch); the wizard then fails naming its install command. With the `wizard` extra the
wizard builds and draws the decision diagram from package data.

The fresh virtualenv really is fresh (no system site-packages, nothing of this checkout on its
path): pip installs torch into it from the CPU wheel this machine keeps on disk, pinned to the
version of the test's own torch so that no other build is downloaded. That costs about a minute
(writing ~1 GB), and it proves the wheel's own dependency list, torch's included. To save time
the virtualenv gets no pip of its own (this environment's pip installs into it with --python)
and no bytecode is compiled at install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from advisor.demo.datasets import DemoSpec, write_folder

REPO = Path(__file__).resolve().parents[2]
# Every step is bounded; the whole test takes about 3 minutes on the 2-core machine.
BUILD_TIMEOUT_S = 240
INSTALL_TIMEOUT_S = 240
RUN_TIMEOUT_S = 120

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXTRA_MODULES = ("ipywidgets", "plotly", "jupyterlab", "pynvml", "IPython")

ITERATE_EXPORT = """
import sys
sys.modules["advisor"] = None  # the training side must not need the advisor (nor its workers)
sys.path.insert(0, sys.argv[1])
import loader
batch = next(iter(loader.make_dataloader(num_workers=1)))
print("batch of", len(batch))
"""

WIZARD_DIAGRAM = """
import sys
from advisor.wizard import show
w = show(sys.argv[1], display=False)
c = w.controller
assert c.run_profile() and c.wait(60) and c.profile is not None, c.errors
assert c.run_hardware() and c.apply_workload() and c.run_recommend(), c.errors
# the diagram is drawn when Details opens, as a user opens it
w.recommendation_panel.details_button.value = True
(mermaid,) = [o["data"]["text/vnd.mermaid"] for o in w.recommendation_panel.flow.outputs
              if "text/vnd.mermaid" in o["data"]]
assert mermaid.startswith("flowchart TD") and "classDef taken" in mermaid, mermaid[:200]
print("diagram with", mermaid.count("-->"), "edges; taken:", mermaid.splitlines()[-1])
c.close()
"""


def _run(args: list[str | os.PathLike[str]], cwd: Path, timeout: float) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [os.fspath(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{output[-4000:]}"
    return output


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel .` without build isolation: the build tools are the ones `make setup`
    installed, and the native build directory (build/{wheel_tag}) is reused."""
    out = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", REPO, "--no-deps", "--no-build-isolation",
         "-q", "-w", out],
        REPO,
        BUILD_TIMEOUT_S,
    )  # fmt: skip
    (built,) = out.glob("loader_advisor-*.whl")
    return built


def test_wheel_holds_the_product_and_nothing_else(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert any(n.startswith("native_loader/_native.") and n.endswith(".so") for n in names)
    for needed in (
        "advisor/py.typed",
        "native_loader/py.typed",
        "native_loader/_native.pyi",
        "native_loader/decoders.py",
        "advisor/wizard/decision_flow.mmd",
        "advisor/wizard/style.css",
        "advisor/core/extras.py",
    ):
        assert needed in names
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"advisor", "native_loader", f"{wheel.name.split('-')[0]}-0.1.0.dist-info"}


def _install(python: Path, cwd: Path, *requirements: str | os.PathLike[str]) -> None:
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile"]
    _run([*pip, *requirements, torch_pin], cwd, INSTALL_TIMEOUT_S)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh virtualenv. It holds about 1 GB and is left to pytest's temporary-directory
    retention (the last 3 runs): deleting it here took 45 s of the shared disk's time."""
    path = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", path], tmp_path, RUN_TIMEOUT_S)
    return path


def test_fresh_virtualenv_runtime_tier_then_wizard(wheel: Path, venv: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    _install(python, tmp_path, wheel)
    missing = (
        "import importlib.util, sys; "
        f"sys.exit([m for m in {EXTRA_MODULES!r} if importlib.util.find_spec(m)] or 0)"
    )
    _run([python, "-c", missing], tmp_path, RUN_TIMEOUT_S)  # no extra came with the runtime

    spec = DemoSpec(images=24, image_kb=(5, 10), classes=2, shard_mb=0.2, large_files=0)
    folder = write_folder(tmp_path / "data", spec)["small-images"]
    assert "recommend" in _run([python, "-m", "advisor", "--help"], tmp_path, RUN_TIMEOUT_S)
    hardware = _run([python, "-m", "advisor", "hardware"], tmp_path, RUN_TIMEOUT_S)
    assert "pip install 'loader-advisor[gpu]'" in hardware
    export = tmp_path / "export" / "loader.py"
    advice = _run(
        [python, "-m", "advisor", "recommend", folder, "--seconds", "5", "--export", export],
        tmp_path,
        RUN_TIMEOUT_S,
    )
    assert "num_workers=" in advice and export.is_file()
    iterated = _run([python, "-c", ITERATE_EXPORT, export.parent], tmp_path, RUN_TIMEOUT_S)
    assert "batch of " in iterated

    no_wizard = subprocess.run(
        [python, "-c", "from advisor.wizard import show; show(display=False)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert no_wizard.returncode != 0
    assert "pip install 'loader-advisor[wizard]'" in no_wizard.stderr

    _install(python, tmp_path, f"{wheel}[wizard]")
    drawn = _run([python, "-c", WIZARD_DIAGRAM, folder], tmp_path, RUN_TIMEOUT_S)
    assert "diagram with" in drawn

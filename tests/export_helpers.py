"""Exporting a loader and running the exported module as a user's training script does.

`advised_session` takes a data set through the steps an export needs; `run_module_code` runs
code against the module in a fresh interpreter with the module's folder on the path, a HOME of
its own, and no endpoint from the environment (the module must carry its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from advisor.core.workload import Workload
from advisor.session import AdvisorSession

ROOT = Path(__file__).resolve().parent.parent


def run_module_code(module_dir: Path, code: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`python -c code` in `module_dir` (bounded at 120 s); its output and return code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT")}
    env.update(HOME=str(home), PYTHONPATH=f"{module_dir}{os.pathsep}{ROOT}")
    return subprocess.run(
        [sys.executable, "-c", code], cwd=module_dir, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def run_module_main(module: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`python <module>.py` in its folder, as step 1 of the wizard's "What next" runs it (bounded
    at 120 s; a HOME of its own, no endpoint from the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, module.name], cwd=module.parent, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip


def advised_session(uri: str, workload: Workload, **location: Any) -> AdvisorSession:
    """A session at `uri` (`location`: set_location's keywords) with `workload`, profiled, its
    machine probed and its recommendation made: what an export is built from."""
    session = AdvisorSession()
    session.set_location(uri, **location)
    session.set_workload(workload)
    session.run_profile()
    session.run_hardware()
    session.run_recommend()
    return session

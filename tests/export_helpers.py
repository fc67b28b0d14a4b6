"""Exporting a loader and running the exported module as a user's training script does.

`advised_session` takes a data set through the steps an export needs. `run_exported` is the one
way a test runs an exported module: in a fresh interpreter, in the module's folder with that
folder and this checkout on the path, a HOME of its own, and no endpoint from the environment
(the module must carry its own); `exported_command` is the same run unstarted (for processes
run at once), `import_exported` the module imported into this process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from advisor.core.workload import Workload
from advisor.session import AdvisorSession

ROOT = Path(__file__).resolve().parent.parent


def terminal_env(aws: Mapping[str, str]) -> dict[str, str]:
    """This environment as a fresh terminal has it: no AWS setting but `aws`, no AWS config or
    credentials file, no instance metadata (so nothing finds this machine's keys by chance)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull)  # fmt: skip
    env.update(aws)
    return env


def exported_command(
    module: Path, *args: str, code: str | None = None, home: Path | None = None,
    aws: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The command and environment `run_exported` runs (its arguments are the same)."""
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT")}
        if aws is None
        else terminal_env(aws)
    )
    env["PYTHONPATH"] = f"{module.parent}{os.pathsep}{ROOT}"
    if home is not None:
        env["HOME"] = str(home)
    script = [module.name] if code is None else ["-c", code]
    return [sys.executable, *script, *args], env


def run_exported(
    module: Path, *args: str, code: str | None = None, home: Path | None = None,
    aws: Mapping[str, str] | None = None, timeout: float = 120,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run the exported `module` (its .py file) in a fresh interpreter in its folder: `python
    <module>.py *args` as its docstring says, or with `code`, `python -c code *args` (code that
    imports the module by its name). `home`: the HOME it runs with (None: this one's); `aws`:
    None keeps this environment's AWS settings but its endpoint, a mapping runs it as a fresh
    terminal with only those (`terminal_env`). Bounded by `timeout` seconds; its output and
    return code."""
    command, env = exported_command(module, *args, code=code, home=home, aws=aws)
    return subprocess.run(
        command, cwd=module.parent, env=env, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


def import_exported(module: Path) -> ModuleType:
    """The exported `module` (its .py file) imported into this process under its name, as
    `import <name>` in a training script would."""
    spec = importlib.util.spec_from_file_location(module.stem, module)
    assert spec is not None and spec.loader is not None
    imported = importlib.util.module_from_spec(spec)
    sys.modules[module.stem] = imported
    spec.loader.exec_module(imported)
    return imported


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

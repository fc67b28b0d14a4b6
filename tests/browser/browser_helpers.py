"""Helpers for the wizard's notebook and browser tests: a small demo data set on the test
endpoint, an isolated JupyterLab or Notebook 7 server, and the check that an exported module
yields a batch.

The server recipe follows docs/jupyter-browser-testing.md (isolated config, runtime, settings
and workspaces dirs; ready on /api/status; stopped through /api/shutdown, by PID as a fallback).
Notebook 7 is built on the same server and settings machinery, so both apps share it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from advisor.demo import ENV_ACCESS_KEY, ENV_SECRET_KEY, ENV_URL
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from testing.kernels import ipc_kernels
from testing.ports import held_port
from tests.export_helpers import run_exported

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "advisor.ipynb"
ARTIFACTS = ROOT / "test-artifacts"
# A few seconds to generate: 40 small JPEGs, shards of ~0.2 MB, two 1 MiB tensors.
SMALL_DEMO = DemoSpec(
    images=40, image_kb=(4, 16), classes=4, shard_mb=0.2, large_files=2, large_mb=1
)
LAB_READY_S = 90.0


def small_demo_env(endpoint: S3Endpoint) -> dict[str, str]:
    """Fill the demo bucket on `endpoint` with SMALL_DEMO; the variables that make a kernel's
    `ensure_demo()` use it instead of starting (and filling) an endpoint of its own."""
    upload(endpoint, spec=SMALL_DEMO)
    return {
        ENV_URL: endpoint.url,
        ENV_ACCESS_KEY: endpoint.credentials.access_key,
        ENV_SECRET_KEY: endpoint.credentials.secret_key,
    }


def check_export_yields_batch(module_path: Path, endpoint: S3Endpoint, timeout: float = 90) -> str:
    """Import the saved module in a fresh interpreter with the demo credentials and take one
    batch from `make_dataloader()`; returns the child's report line."""
    name = module_path.stem
    code = f"import {name}\nbatch = next(iter({name}.make_dataloader()))\n"
    code += 'print("BATCH", type(batch).__name__, len(batch))\n'
    aws = {
        "AWS_ACCESS_KEY_ID": endpoint.credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": endpoint.credentials.secret_key,
        "AWS_ENDPOINT_URL": endpoint.url,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = run_exported(module_path, code=code, aws=aws, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("BATCH")]
    assert line, done.stdout
    return line[0]


JupyterApp = Literal["lab", "notebook"]


@dataclass(frozen=True)
class Lab:
    url: str
    token: str
    root: Path
    app: JupyterApp = "lab"

    def notebook_url(self, relative: str) -> str:
        if self.app == "notebook":  # Notebook 7: one document per page, no workspace to reset
            return f"{self.url}/notebooks/{relative}?token={self.token}"
        return f"{self.url}/lab/tree/{relative}?reset&token={self.token}"


def _write_settings(settings: Path) -> None:
    for name, value in {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
            "windowingMode": "none",
            "autoStartDefaultKernel": True,
        },
    }.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@contextmanager
def jupyter_lab(
    root: Path,
    state: Path,
    env: dict[str, str],
    log: Path,
    app: JupyterApp = "lab",
    unset: tuple[str, ...] = (),
) -> Iterator[Lab]:
    """JupyterLab (`app="lab"`) or Notebook 7 (`app="notebook"`) on 127.0.0.1 serving `root`,
    with its own config/runtime/settings/workspaces. The demo variables reach it only through
    `env`: without them its kernels start a demo endpoint of their own, as a user's would, from
    an empty demo cache. `unset`: variables of this process its kernels do not inherit (the
    test session's AWS keys, for a kernel with nothing set by hand). Its port is held for it
    (`testing.ports.held_port`): a test beside this one cannot take it before Jupyter binds it."""
    with held_port() as port, _jupyter_on(port, root, state, env, log, app, unset) as lab:
        yield lab


@contextmanager
def _jupyter_on(
    port: int,
    root: Path,
    state: Path,
    env: dict[str, str],
    log: Path,
    app: JupyterApp,
    unset: tuple[str, ...],
) -> Iterator[Lab]:
    token = secrets.token_hex(16)
    dirs = {n: state / n for n in ("config", "runtime", "settings", "workspaces")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    _write_settings(dirs["settings"])
    demo_names = (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY)
    child_env = {
        **{k: v for k, v in os.environ.items() if k not in (*demo_names, *unset)},
        # a cache of generated demo data of its own: a new user's first kernel starts cold
        "LOADER_ADVISOR_DEMO_CACHE": str(state / "demo-cache"),
        **env,
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
        "JUPYTERLAB_WORKSPACES_DIR": str(dirs["workspaces"]),
    }
    args = [
        sys.executable, "-m", "jupyter", app, "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    if app == "lab":  # Notebook 7 has neither option; the settings above keep its news off
        args += [
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
    if os.geteuid() == 0:
        args.append("--allow-root")
    url = f"http://127.0.0.1:{port}"
    kernels = ExitStack()
    # the kernels' channels on Unix sockets: TCP ports picked for them can be taken by a test
    # running beside this one before the kernel binds them
    kernel_config = kernels.enter_context(ipc_kernels())
    args += [
        f"--KernelManager.{name}={value}" for name, value in kernel_config.KernelManager.items()
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(args, env=child_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + LAB_READY_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"jupyter {app} exited with {process.returncode}; see {log}")
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2).close()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter {app} not ready in {LAB_READY_S:.0f} s") from None
                time.sleep(0.3)
        yield Lab(url, token, root, app)
    finally:
        try:
            request = urllib.request.Request(
                f"{url}/api/shutdown", method="POST", headers={"Authorization": f"token {token}"}
            )
            urllib.request.urlopen(request, timeout=5).close()
        except (urllib.error.URLError, OSError):
            pass
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        kernels.close()

"""The two `make` entry points on the demo data.

`make lab` (`python -m advisor.lab`): the demo S3 endpoint in the background (its data kept across
runs, as the kernels' demo keeps it: `advisor.demo.ensure_demo`) and JupyterLab on the wizard
notebook. Prints the URL to open. Ctrl-C (or SIGTERM) stops JupyterLab and the endpoint it
started. Set LOADER_ADVISOR_NO_DEMO=1 to skip the demo endpoint (the wizard then starts one on
demand).

`make demo` (`python -m advisor.lab --cli`): a throwaway endpoint with small demo data, then the
advisor's CLI, `recommend`, on each layout.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType

from advisor.core.bounds import TrialBudget, arg_type, range_of
from advisor.demo import ensure_demo, stop_demo
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.ports import free_ports
from advisor.demo.server import S3Server

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "notebooks/advisor.ipynb"
READY_TIMEOUT_S = 120.0


def _wait_for_lab(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise RuntimeError(f"JupyterLab did not answer on {url} within {READY_TIMEOUT_S:.0f} s")


def run_cli(seconds: float) -> int:
    """`make demo`: a throwaway endpoint with small demo data, then `recommend` on each layout."""
    from advisor.cli import main as advisor_main

    spec = DemoSpec(images=400, shard_mb=16, large_files=2, large_mb=32)
    with S3Server() as endpoint:
        print(f"demo endpoint {endpoint.url}; generating a small demo data set ...", flush=True)
        uris = upload(endpoint, spec=spec)
        # This process is the demo's own client: it may use the demo's dummy credentials.
        os.environ["AWS_ACCESS_KEY_ID"] = endpoint.credentials.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = endpoint.credentials.secret_key
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        for uri in uris.values():
            print(f"\n=== python -m advisor recommend {uri} --consumer-rate 400 ===", flush=True)
            code = advisor_main(
                ["recommend", uri, "--endpoint-url", endpoint.url, "--consumer-rate", "400",
                 "--seconds", str(seconds), "--epochs", "3"]
            )  # fmt: skip
            if code != 0:
                return code
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m advisor.lab",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--cli", action="store_true",
        help="instead of JupyterLab, run the advisor CLI end to end on small demo data",
    )  # fmt: skip
    parser.add_argument(
        "--seconds", type=arg_type(range_of(TrialBudget, "seconds"), "--seconds"), default=10.0,
        help="with --cli: the trial budget of each layout",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cli:
        return run_cli(args.seconds)
    return run_lab()


def run_lab() -> int:
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    env = dict(os.environ)
    if not os.environ.get("LOADER_ADVISOR_NO_DEMO"):
        print("starting the demo S3 endpoint (its datasets are generated the first time) ...",
              flush=True)  # fmt: skip
        demo = ensure_demo()  # from the kept store when an earlier run left one
        env.update(demo.env())
        print(f"demo S3 endpoint: {demo.endpoint.url}  datasets: {', '.join(demo.uris.values())}")
    port = int(os.environ.get("LOADER_ADVISOR_LAB_PORT") or free_ports(1)[0])
    token = secrets.token_hex(16)
    args = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={ROOT}",
    ]  # fmt: skip
    if os.geteuid() == 0:
        args.append("--allow-root")
    lab = subprocess.Popen(args, env=env, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}"
        _wait_for_lab(f"http://127.0.0.1:{port}/api/status?token={token}", lab)
        print(f"\nLoader Advisor is ready. Open:\n\n    {url}\n\nCtrl-C stops everything.\n")
        sys.stdout.flush()
        while not stopping and lab.poll() is None:
            time.sleep(0.3)
    finally:
        if lab.poll() is None:
            lab.terminate()
            try:
                lab.wait(timeout=15)
            except subprocess.TimeoutExpired:
                lab.kill()
                lab.wait()
        stop_demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())

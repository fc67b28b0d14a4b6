"""The advisor in `python -m bench e2e`, run as a user runs it: `python -m advisor recommend
s3://... --export` for one scenario, timed, with its export and the advice it gave."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.e2e_data import BUCKET
from bench.e2e_plan import Plan, Scenario

REPO = Path(__file__).resolve().parent.parent
ADVISOR_TIMEOUT_S = 120.0
ADVISOR_BOUND = 6  # x the trial budget: a trial still running then is stopped


def advise(
    s: Scenario, endpoint: str, p: Plan, out_dir: Path, env: dict[str, str]
) -> dict[str, Any]:
    """`python -m advisor recommend s3://... --export` for one scenario, as a user types it; its
    export and timing. A trial that overruns its budget by far is stopped, recorded, and the
    advice taken again from the model alone (`--no-trial`), so that the loaders still run."""
    module = out_dir / f"export_{len(list(out_dir.glob('*.py')))}.py"
    cmd = [
        sys.executable,
        "-m",
        "advisor",
        "recommend",
        f"s3://{BUCKET}/{s.data}/",
        "--endpoint-url",
        endpoint,
        "--consumer-rate",
        f"{s.consumer_rate:g}",
        "--export",
        str(module),
        "--json",
        "--quiet",
    ]
    if s.data == "images":
        cmd += ["--batch-size", "32", "--transform", f"bench.e2e_loaders:{_transform(s)}"]
    else:
        cmd += ["--batch-size", "512"]
    note = ""
    t0 = time.monotonic()
    try:
        out = _advisor(
            [*cmd, "--seconds", f"{p.trial_seconds:g}"], env, ADVISOR_BOUND * p.trial_seconds
        )
    except subprocess.TimeoutExpired:
        note = (
            f"the {p.trial_seconds:g} s trial had not finished after "
            f"{ADVISOR_BOUND * p.trial_seconds:g} s; advice from the model alone (--no-trial)"
        )
        out = _advisor([*cmd, "--no-trial"], env, ADVISOR_TIMEOUT_S)
    except RuntimeError as error:
        if "timed out" not in str(error):
            raise
        # The trial's own watch gave up (its budget passed on a loaded machine).
        note = f"{str(error)[:160]}; advice from the model alone (--no-trial)"
        out = _advisor([*cmd, "--no-trial"], env, ADVISOR_TIMEOUT_S)
    wall = time.monotonic() - t0
    rec, trial = out["recommendation"], out.get("trial") or {}
    return {
        "module": str(module),
        "wall_s": round(wall, 1),
        "trial_s": round(trial.get("seconds_used", float("nan")), 1),
        "note": note,
        "num_workers": rec["num_workers"],
        "requests_in_flight": rec["requests_in_flight"],
        "inflight_bytes": rec["inflight_bytes"],
        "data_source": rec["data_source"],
    }


def _advisor(cmd: list[str], env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # its own session: the trial's DataLoader workers too
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"advisor failed: {err.strip()[-500:]}")
    return dict(json.loads(out))


def _transform(s: Scenario) -> str:
    return "decode_resize" if s.transform == "decode" else "as_bytes"

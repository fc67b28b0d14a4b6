"""Reader vs peers: native_loader against boto3, s3fs, s3torchconnector, awscrt, curl and wrk.

    python -m bench reader [--quick] [--only SCENARIO ...] [--out bench/results/reader.json]

One run, one machine, the same bytes on three endpoints on 127.0.0.1:
  seaweedfs   the local SeaweedFS (`advisor.demo.server.S3Server`), signed requests;
  nginx       nginx serving the same files path-style (`bench.nginx`), anonymous requests: a
              fast data plane, so the server is not the bottleneck;
  nginx+30ms  the `advisor.demo.proxy.Proxy` in front of nginx adding 30 ms before every
              response's first byte (real-S3-like latency);
  local       the same files on the local disk (page cache warm after the first pass): the
              reader's `read_many` and `open_many` against Python's ``open().read()``.

Every client runs in its own subprocess (`python -m bench.clients`), so CPU seconds and peak RSS
are its own. Each (scenario, client) tries a few settings twice; the best setting (by median)
is run again until it has `repeats` runs, and the median of each metric is reported. The table
is printed and written with the raw runs, the machine and the targets to
bench/results/reader.json (and .md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.client_run import Spec
from bench.netem import proxy_process
from bench.reader_plan import LATENCY_MS, Candidate, Dataset, Plan, Scenario, make_plan
from bench.reader_report import Row, evaluate, table, targets_table
from bench.record import Run

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"
BUCKET = "bench"
CLIENT_TIMEOUT_S = 180.0
SWEEP_RUNS = 2  # runs of every setting before the best is chosen


# --- data and endpoints -------------------------------------------------------------------------


def write_data(root: Path, datasets: list[Dataset]) -> None:
    """Random bytes (incompressible), one file per object under root/bucket/."""
    import numpy as np

    rng = np.random.default_rng(0)
    for ds in datasets:
        for key in ds.object_keys():
            path = root / BUCKET / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rng.integers(0, 256, ds.size, dtype=np.uint8).tobytes())
    for dirpath, _, _ in os.walk(root):  # nginx workers may run as `nobody`
        os.chmod(dirpath, 0o755)


def upload(endpoint: Any, root: Path, datasets: list[Dataset]) -> None:
    client = endpoint.boto3_client()
    client.create_bucket(Bucket=BUCKET)
    keys = [key for ds in datasets for key in ds.object_keys()]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.upload_file(str(root / BUCKET / k), BUCKET, k), keys))


@dataclass
class Endpoints:
    urls: dict[str, str]
    access_key: str
    secret_key: str


@contextlib.contextmanager
def endpoints(plan: Plan, verbose: bool) -> Iterator[Endpoints]:
    from advisor.demo.server import S3Server
    from bench.nginx import Nginx

    needed = {s.endpoint for s in plan.scenarios}
    datasets = sorted(
        {s.dataset for s in plan.scenarios}, key=lambda d: d.size * d.count, reverse=True
    )
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-data-")))
        t0 = time.monotonic()
        write_data(root, datasets)
        urls: dict[str, str] = {}
        server = S3Server()
        seaweed = stack.enter_context(server)
        if "seaweedfs" in needed:
            upload(seaweed, root, datasets)
            urls["seaweedfs"] = seaweed.url
        urls["local"] = f"file://{root}"
        nginx_url = stack.enter_context(Nginx(root))
        urls["nginx"] = nginx_url
        if "nginx+30ms" in needed:
            urls["nginx+30ms"] = stack.enter_context(proxy_process(nginx_url, LATENCY_MS))
        if verbose:
            print(f"# data and endpoints ready in {time.monotonic() - t0:.1f} s: {urls}")
        creds = seaweed.credentials
        yield Endpoints(urls, creds.access_key, creds.secret_key)


# --- running clients ----------------------------------------------------------------------------


def run_client(client: str, spec: Spec) -> dict[str, Any]:
    """One client run in a fresh subprocess; its measurement as a dict (or an error)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="bench-spec-") as f:
        json.dump(asdict(spec), f)
        f.flush()
        cmd = [sys.executable, "-m", "bench.clients", client, "--json", "--spec", f.name]
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=CLIENT_TIMEOUT_S,
                cwd=REPO,
            )
        except subprocess.TimeoutExpired:
            return {"client": client, "concurrency": spec.concurrency, "error": "timeout"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        return {"client": client, "concurrency": spec.concurrency, "error": " | ".join(tail)}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def rates(m: dict[str, Any]) -> dict[str, float]:
    wall, objects, nbytes, cpu = m["wall_s"], m["objects"], m["bytes"], m["cpu_s"]
    return {
        "mb_s": nbytes / wall / 1e6,
        "obj_s": objects / wall,
        "cpu_s_per_gb": cpu / (nbytes / 1e9) if nbytes else float("nan"),
        "cpu_ms_per_obj": cpu / objects * 1e3 if objects else float("nan"),
        "peak_rss_mb": m["peak_rss_mb"],
    }


def run_scenario(
    plan: Plan, scenario: Scenario, eps: Endpoints, raw: list[dict[str, Any]], verbose: bool
) -> list[Row]:
    ds = scenario.dataset
    signed = scenario.endpoint == "seaweedfs"
    base = Spec(
        endpoint=eps.urls[scenario.endpoint],
        signed=signed,
        bucket=BUCKET,
        keys=ds.object_keys(),
        sizes=[ds.size] * ds.count,
        access_key=eps.access_key if signed else "",
        secret_key=eps.secret_key if signed else "",
        seconds=plan.seconds,
    )
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {c.name: {} for c in scenario.candidates}
    errors: dict[str, list[str]] = {c.name: [] for c in scenario.candidates}

    def one(cand: Candidate, setting: int) -> None:
        m = run_client(cand.client, replace(base, concurrency=setting))
        m.update(scenario=scenario.name, label=cand.name, setting=setting)
        raw.append(m)
        if "error" in m:
            errors[cand.name].append(f"{cand.name}@{setting}: {m['error']}")
            if verbose:
                print(f"  {cand.name:<18} @{setting:<4} ERROR {m['error'][:200]}")
            return
        m.update(rates(m))
        runs[cand.name].setdefault(setting, []).append(m)
        if verbose:
            print(
                f"  {cand.name:<18} @{setting:<4} {m['mb_s']:8.1f} MB/s "
                f"{m['obj_s']:9.1f} obj/s  cpu {m['cpu_ms_per_obj']:7.3f} ms/obj"
            )

    # Sweep: every setting SWEEP_RUNS times, choosing the best by its median (one run could
    # crown an outlier: native's 64 MiB runs move by 20-30% from run to run). Every round goes
    # over all the clients, so that a change in the machine's load hits every client alike
    # rather than whichever ran last; the chosen settings then run until they have `repeats`.
    sweep_runs = min(SWEEP_RUNS, plan.repeats)
    for _ in range(sweep_runs):
        for cand in scenario.candidates:
            for setting in cand.settings:
                one(cand, setting)
    chosen: dict[str, list[int]] = {}
    for cand in scenario.candidates:
        done = runs[cand.name]
        if done:
            best = max(done, key=lambda s: statistics.median(r["obj_s"] for r in done[s]))
            chosen[cand.name] = sorted(done) if cand.each else [best]
    for _ in range(plan.repeats - sweep_runs):
        for cand in scenario.candidates:
            for setting in chosen.get(cand.name, []):
                one(cand, setting)
    rows = []
    for cand in scenario.candidates:
        done = runs[cand.name]
        if not done:
            nan = float("nan")
            rows.append(
                Row(scenario.name, cand.name, 0, 0, nan, nan, nan, nan, nan, {}, errors[cand.name])
            )
            continue
        tried = {
            str(s): round(statistics.median(m["obj_s"] for m in r), 1) for s, r in done.items()
        }
        for setting in chosen[cand.name]:
            rows.append(
                _row(scenario.name, cand.name, setting, done[setting], tried, errors[cand.name])
            )
    return rows


def _row(
    scenario: str,
    client: str,
    setting: int,
    ms: list[dict[str, Any]],
    tried: dict[str, float],
    errors: list[str],
) -> Row:
    """The median of each metric over the runs of one setting."""

    def med(key: str) -> float:
        return float(statistics.median(m[key] for m in ms))

    return Row(
        scenario, client, setting, len(ms), med("mb_s"), med("obj_s"), med("cpu_s_per_gb"),
        med("cpu_ms_per_obj"), med("peak_rss_mb"), tried, errors,
    )  # fmt: skip


def proxy_ceiling(eps: Endpoints, ds: Dataset, seconds: float) -> dict[str, Any]:
    """wrk through the proxy with no added latency: the most objects/s the proxy can relay."""
    with proxy_process(eps.urls["nginx"], 0.0) as url:
        spec = Spec(
            endpoint=url,
            signed=False,
            bucket=BUCKET,
            keys=ds.object_keys(),
            sizes=[ds.size] * ds.count,
            concurrency=64,
            seconds=seconds,
        )
        m = run_client("wrk", spec)
    if "error" not in m:
        m.update(rates(m))
    return m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench reader",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="fewer data and settings (~2 min)")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names to run")
    parser.add_argument(
        "--clients", nargs="*", default=None, help="client names to run (default: all)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "reader.json")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the tables")
    args = parser.parse_args(argv)
    verbose = not args.quiet
    plan = make_plan(args.quick)
    if args.only:
        plan.scenarios = [s for s in plan.scenarios if s.name in args.only]
        if not plan.scenarios:
            known = [s.name for s in make_plan(False).scenarios]
            parser.error(f"--only matches no scenario; known: {known}")
    if args.clients:
        for i, sc in enumerate(plan.scenarios):
            kept = tuple(c for c in sc.candidates if c.name in args.clients)
            plan.scenarios[i] = replace(sc, candidates=kept)
    command = "python -m bench reader" + (" --quick" if args.quick else "")
    if args.only:
        command += " --only " + " ".join(repr(s) for s in args.only)
    if args.clients:
        command += " --clients " + " ".join(args.clients)
    run = Run.begin(command)
    raw: list[dict[str, Any]] = []
    rows: list[Row] = []
    ceiling: dict[str, Any] = {}
    with endpoints(plan, verbose) as eps:
        for scenario in plan.scenarios:
            if verbose:
                print(f"# {scenario.name}")
            rows += run_scenario(plan, scenario, eps, raw, verbose)
            if scenario.endpoint == "nginx+30ms":
                ceiling = proxy_ceiling(eps, scenario.dataset, plan.seconds)
                if verbose and "obj_s" in ceiling:
                    print(f"  proxy ceiling (wrk, 0 ms) {ceiling['obj_s']:9.1f} obj/s")
    targets = evaluate(rows, plan)
    report: dict[str, Any] = {
        "plan": {
            "seconds": plan.seconds,
            "repeats": plan.repeats,
            "datasets": [asdict(d) for d in plan.datasets.values()],
        },
        "rows": [asdict(r) for r in rows],
        "targets": [asdict(t) for t in targets],
        "proxy_ceiling": ceiling,
        "runs": raw,
    }
    md = [table(rows), "", targets_table(targets)]
    if "obj_s" in ceiling:
        md += [
            "",
            f"Proxy ceiling (wrk through the proxy, no added latency, 64 connections): "
            f"{ceiling['obj_s']:,.0f} objects/s.",
        ]
    text = "\n".join(md)
    record = run.write(args.out, report, markdown=text)
    print()
    print(text)
    print(f"\n# {command}: {record.elapsed_s:.0f} s; results in {args.out}")
    return 0

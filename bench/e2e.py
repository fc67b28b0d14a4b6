"""End to end: Loader Advisor's exported loader against the loaders people write today.

    python -m bench e2e [--quick] [--out bench/results/e2e.json]

One run, one SeaweedFS, behind the project's latency proxy at 0 ms and at 20 ms to first byte
(20 ms also caps each connection at 90 MB/s, as S3 does). For each scenario the advisor is run as
a user runs it (`python -m advisor recommend ... --export`, its trial included and timed), and
then every loader takes the same training loop over the same data, in a fresh process per run,
interleaved over repetitions (A B C A B C ...): see `bench.e2e_loaders`. Data:
  images  100 KB JPEGs, decoded and resized to 224x224 per sample ("decode"), or the same
          objects as raw bytes ("bytes"); batch 32.
  text    ~150 MB text shards (one ~1 KB document per line) read as lines; batch 512.
Peak RSS is the largest sum of the RSS of the run's process and its workers, sampled every
50 ms from outside (pages shared after fork count once per process). Server CPU is the CPU time
SeaweedFS spent over each run (start-up included): where it nears the epoch, the loader reads
what the server serves. The table and JSON go to bench/results/e2e.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from advisor.measure.hardware.host import cpu_seconds, process_tree, rss_bytes
from bench.e2e_advisor import advise
from bench.e2e_data import BUCKET, upload
from bench.e2e_loaders import RunSpec, missing
from bench.e2e_plan import Plan, Scenario, plan, scenarios
from bench.e2e_report import METRICS, Spread, bars, bars_table, derived, table
from bench.netem import proxy_process, raise_priority
from bench.record import Run

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "e2e.json"
RUN_TIMEOUT_S = 240.0
S3_BANDWIDTH_MBPS = 90.0  # per connection, behind the 20 ms proxy


# --- one run --------------------------------------------------------------------------------------


@contextlib.contextmanager
def tree_rss_sampler(pid: int, period_s: float = 0.05) -> Iterator[list[float]]:
    """Samples the summed RSS of `pid` and its descendants; yields [peak MiB] (updated live)."""
    peak = [0.0]
    stop = threading.Event()

    def sample() -> None:
        pids = [pid]
        tick = 0
        while not stop.wait(period_s):
            if tick % 2 == 0:  # rescan /proc every 100 ms: workers of a short run live ~0.5 s
                pids = process_tree(pid)
            tick += 1
            peak[0] = max(peak[0], sum(rss_bytes(p) for p in pids) / 2**20)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join(timeout=2)


def run_one(spec: RunSpec, env: dict[str, str], server_pid: int | None = None) -> dict[str, Any]:
    """One run in a fresh process: its result line, with the peak RSS of its process tree and
    the CPU seconds the S3 server (`server_pid`) spent meanwhile (NaN where not known)."""
    server_cpu = cpu_seconds(server_pid) if server_pid is not None else float("nan")
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="bench-e2e-") as f:
        json.dump(asdict(spec), f)
        f.flush()
        cmd = [sys.executable, "-m", "bench.e2e_loaders", "--spec", f.name]
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        with tree_rss_sampler(proc.pid) as peak:
            try:
                out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                for pid in reversed(process_tree(proc.pid)):
                    with contextlib.suppress(OSError):
                        os.kill(pid, 9)
                proc.communicate()
                return {"error": f"timeout after {RUN_TIMEOUT_S:.0f} s"}
    if proc.returncode != 0 or not out.strip():
        return {"error": " | ".join(err.strip().splitlines()[-3:])[-400:]}
    result = dict(json.loads(out.strip().splitlines()[-1]))
    result["peak_rss_mb"] = peak[0]
    if server_pid is not None:
        result["server_cpu_s"] = cpu_seconds(server_pid) - server_cpu
    return result


# --- the run ------------------------------------------------------------------------------------


def _spec(
    s: Scenario,
    loader: str,
    workers: int | None,
    url: str,
    keys: dict[str, list[str]],
    advice: dict[str, Any],
    image_epochs: int,
) -> RunSpec:
    data_keys = keys[s.data]
    if s.data == "images":
        samples, batch, epochs = len(data_keys), 32, image_epochs
    else:  # every line of every shard: the loop ends with the loader; one epoch
        samples, batch, epochs = 10**9, 512, 1
    return RunSpec(
        loader=loader,
        endpoint=url,
        bucket=BUCKET,
        prefix=f"{s.data}/",
        keys=data_keys,
        transform=s.transform,
        batch_size=batch,
        num_workers=advice["num_workers"] if workers is None else workers,
        samples=samples,
        consumer_rate=s.consumer_rate,
        export=advice["module"],
        epochs=epochs,
    )


def run_scenario(
    s: Scenario,
    url: str,
    keys: dict[str, list[str]],
    advice: dict[str, Any],
    repeats: int,
    env: dict[str, str],
    image_epochs: int = 1,
    server_pid: int | None = None,
) -> list[dict[str, Any]]:
    """Every config `repeats` times, interleaved; one row per config."""
    labels = [_label(loader, w) for loader, w in s.configs]
    skipped = {
        lab: ", ".join(missing(loader)) for lab, (loader, _) in zip(labels, s.configs, strict=False)
    }
    runs: dict[str, list[dict[str, Any]]] = {lab: [] for lab in labels}
    errors: dict[str, list[str]] = {lab: [] for lab in labels}
    for rep in range(repeats):
        for label, (loader, workers) in zip(labels, s.configs, strict=True):
            if skipped[label]:
                continue
            spec = _spec(s, loader, workers, url, keys, advice, image_epochs)
            raw = run_one(spec, env, server_pid)
            raw.update(rep=rep)
            if "error" in raw:
                errors[label].append(raw["error"])
                print(f"  {label:<22} ERROR {raw['error'][:300]}", flush=True)
                continue
            raw.update(derived(raw))
            runs[label].append(raw)
            print(
                f"  {label:<22} {raw['samples_per_s']:9,.0f} samples/s "
                f"({raw['steady_samples_per_s']:,.0f} after the 1st batch)  first batch "
                f"{raw['first_batch_s']:5.2f} s  epoch {raw['epoch_s']:6.1f} s  "
                f"later {raw['later_samples_per_s']:7,.0f} samples/s  "
                f"RSS {raw['peak_rss_mb']:6,.0f} MB  CPU {raw['cpu_ms_per_sample']:.2f} ms/sample",
                flush=True,
            )
    rows = []
    for label in labels:
        row: dict[str, Any] = {
            "scenario": s.name,
            "loader": label,
            "runs": len(runs[label]),
            "errors": errors[label],
            "raw": runs[label],
        }
        if skipped[label]:
            row["skipped"] = f"not installed: {skipped[label]}"
        elif not runs[label]:
            row["skipped"] = f"failed: {(errors[label] or ['?'])[0][:120]}"
        else:
            row["workers"] = runs[label][0]["num_workers"]
            for key, _, _ in METRICS:
                row[key] = asdict(Spread.over([r[key] for r in runs[label]]))
        rows.append(row)
    return rows


def _label(loader: str, workers: int | None) -> str:
    return loader if workers is None else f"{loader} w{workers}"


def _trial(advice: dict[str, Any]) -> str:
    seconds = advice["trial_s"]
    return "no trial" if seconds != seconds else f"trial {seconds} s"  # NaN: none ran


def write_report(
    out: Path,
    run: Run,
    p: Plan,
    chosen: list[Scenario],
    advice: dict[str, dict[str, Any]],
    rows: list[dict[str, Any]],
    final: bool,
) -> None:
    """The JSON and the markdown table; written after every scenario, so a cut run keeps its
    finished part."""
    measured = bars(rows)
    steady = bars(rows, "steady_samples_per_s")
    later = bars(rows, "later_samples_per_s")
    report: dict[str, Any] = {
        "complete": final,
        "plan": asdict(p),
        "scenarios": [asdict(s) for s in chosen],
        "advice": advice,
        "rows": rows,
        "bars": [asdict(b) | {"met": b.met} for b in measured],
        "bars_after_first_batch": [asdict(b) | {"met": b.met} for b in steady],
        "bars_later_epochs": [asdict(b) | {"met": b.met} for b in later],
    }
    advice_lines = [
        f"- {name}: advisor {a['wall_s']} s ({_trial(a)}) -> num_workers "
        f"{a['num_workers']}, {a['requests_in_flight']} requests in flight"
        + (f" ({a['note']})" if a["note"] else "")
        for name, a in advice.items()
    ]
    text = "\n".join([table(rows), "", bars_table(measured + steady + later), "", *advice_lines])
    record = run.write(out, report, markdown=text)
    if final:
        print(f"\n{text}\n\n# {record.command}: {record.elapsed_s:.0f} s; results in {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench e2e",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="two scenarios, 2 repetitions")
    parser.add_argument("--only", nargs="+", metavar="SCENARIO", help="only these scenarios")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    p, chosen = plan(args.quick), scenarios(args.quick, args.only)
    command = "python -m bench e2e" + (" --quick" if args.quick else "")
    run = Run.begin(command)
    t0 = run.t0
    os.environ.setdefault("GOMAXPROCS", "1")  # SeaweedFS: see bench.advisor_matrix
    from advisor.demo.server import S3Server

    rows: list[dict[str, Any]] = []
    advice: dict[str, dict[str, Any]] = {}
    server = S3Server()
    with server as endpoint, contextlib.ExitStack() as stack:
        if server.pid is not None:
            raise_priority(server.pid)
        creds = endpoint.credentials
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env |= {
            "AWS_ACCESS_KEY_ID": creds.access_key,
            "AWS_SECRET_ACCESS_KEY": creds.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        shards = p.shards if any(s.data == "text" for s in chosen) else 0
        keys = upload(endpoint.boto3_client(), p.images, shards)
        urls = {0: stack.enter_context(proxy_process(endpoint.url, 0.0))}
        urls[20] = stack.enter_context(proxy_process(endpoint.url, 20.0, S3_BANDWIDTH_MBPS))
        exports = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-e2e-")))
        print(f"# data and endpoints ready in {time.monotonic() - t0:.0f} s", flush=True)
        for s in chosen:
            url = urls[s.latency_ms]
            advice[s.name] = advise(s, url, p, exports, env)
            a = advice[s.name]
            print(
                f"# {s.name}: advisor {a['wall_s']} s (trial {a['trial_s']} s): "
                f"{a['num_workers']} workers, {a['requests_in_flight']} requests / "
                f"{a['inflight_bytes'] >> 20} MiB in flight, {a['data_source']}",
                flush=True,
            )
            if a["note"]:
                print(f"#   note: {a['note']}", flush=True)
            repeats = p.repeats if s.judged else max(2, p.repeats - 1)
            rows += run_scenario(
                s, url, keys, advice[s.name], repeats, env, p.image_epochs, server.pid
            )
            write_report(args.out, run, p, chosen, advice, rows, False)
    write_report(args.out, run, p, chosen, advice, rows, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

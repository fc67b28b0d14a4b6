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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from advisor.measure.hardware.host import cpu_seconds, process_tree, rss_bytes
from bench.e2e_data import BUCKET, upload
from bench.e2e_loaders import RunSpec, missing
from bench.e2e_report import METRICS, Bar, Spread, bar, bars_table, derived, table
from bench.netem import proxy_process, raise_priority
from bench.record import Run

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "e2e.json"
CORES = os.cpu_count() or 1
RUN_TIMEOUT_S = 240.0
ADVISOR_TIMEOUT_S = 120.0
ADVISOR_BOUND = 6  # x the trial budget: a trial still running then is stopped
S3_BANDWIDTH_MBPS = 90.0  # per connection, behind the 20 ms proxy
FAST_IMAGES = 2000.0  # samples/s: ResNet-50 on one A100-class GPU with AMP
REALISTIC_IMAGES = 100.0  # samples/s: below what the best loaders reach here: who keeps up?
FAST_LINES = 1e6  # lines/s: any loader here is slower; the step costs 0.5 ms per batch


@dataclass(frozen=True)
class Scenario:
    name: str
    data: str  # "images" or "text"
    transform: str  # "decode", "bytes" or "lines"
    latency_ms: int
    consumer_rate: float
    configs: tuple[tuple[str, int | None], ...]  # (loader, num_workers; None = as exported)
    judged: bool = False  # a bar rests on it: it gets the plan's repetitions, others one fewer


def _image_configs(every: bool) -> tuple[tuple[str, int | None], ...]:
    """Every peer at num_workers 0 and = cores where a bar is judged (`every`); elsewhere the
    tutorial at both counts and the fastest peer of the judged scenario (s3torchconnector's map
    dataset at = cores), to bound the run. "exported-nw" overrides the exported num_workers with
    the cores: what the reader does when the advice's cap (NW-1: one core kept for the training
    process) is lifted. Where a bar is judged, "exported-fill" is the same module with its
    first epoch streamed from S3 into a cache instead of a copy made before it (the other way
    a copy-local export may fill local disk); neither counts as a peer."""
    peers = ("boto3", "fsspec", "s3tc-map", "s3tc-iterable") if every else ("boto3",)
    chosen: tuple[tuple[str, int | None], ...] = tuple((p, w) for p in peers for w in (0, CORES))
    if not every:
        chosen += (("s3tc-map", CORES),)
    fill: tuple[tuple[str, int | None], ...] = (("exported-fill", None),) if every else ()
    return (*chosen, ("exported", None), ("exported-nw", CORES), *fill)


TEXT_CONFIGS = (("lines-fsspec", 0), ("lines-native", 0), ("lines-fsspec", 4), ("lines-native", 4))


def scenarios(quick: bool, only: list[str] | None = None) -> list[Scenario]:
    """The default run's scenarios; --quick: the two judged ones, with fewer configurations."""
    every, some = _image_configs(not quick), _image_configs(False)
    text = TEXT_CONFIGS[2:] if quick else TEXT_CONFIGS
    out = [
        Scenario("20ms jpeg fast", "images", "decode", 20, FAST_IMAGES, every, judged=True),
        Scenario("20ms text fast", "text", "lines", 20, FAST_LINES, text, judged=True),
        Scenario("20ms jpeg realistic", "images", "decode", 20, REALISTIC_IMAGES, some),
        Scenario("20ms bytes fast", "images", "bytes", 20, FAST_IMAGES, some),
        Scenario("0ms jpeg fast", "images", "decode", 0, FAST_IMAGES, every, judged=True),
    ]
    if only:
        unknown = set(only) - {s.name for s in out}
        if unknown:
            raise SystemExit(f"--only: unknown {sorted(unknown)}; known: {[s.name for s in out]}")
        return [s for s in out if s.name in only]
    return [s for s in out if s.judged] if quick else out


@dataclass(frozen=True)
class Plan:
    images: int  # objects in the image set; every image epoch reads this many samples
    shards: int
    repeats: int
    trial_seconds: float  # the advisor's default budget: what a user's trial measures
    image_epochs: int  # per image run: the first (from S3) and the later ones


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(images=128, shards=4, repeats=2, trial_seconds=30.0, image_epochs=2)
    return Plan(images=192, shards=4, repeats=3, trial_seconds=30.0, image_epochs=3)


# --- the advisor, as a user runs it ---------------------------------------------------------------


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


def _rates(rows: list[dict[str, Any]], scenario: str, key: str) -> dict[str, list[float]]:
    """`key` per loader of one scenario, indexed by repetition (NaN where a run failed)."""
    out: dict[str, list[float]] = {}
    for row in rows:
        if row["scenario"] == scenario and row["raw"]:
            by_rep = {r["rep"]: r[key] for r in row["raw"]}
            out[row["loader"]] = [by_rep.get(i, float("nan")) for i in range(max(by_rep) + 1)]
    return out


def bars(rows: list[dict[str, Any]], key: str = "samples_per_s") -> list[Bar]:
    """The issue's bars on `key` (samples/s over the epoch; the steady rate for reference)."""
    jpeg = _rates(rows, "20ms jpeg fast", key)
    jpeg0 = _rates(rows, "0ms jpeg fast", key)
    peers = [lab for lab in jpeg if not lab.startswith("exported")]
    peers0 = [lab for lab in jpeg0 if not lab.startswith("exported")]
    text = _rates(rows, "20ms text fast", key)
    tag = TAGS[key]
    images = [
        bar(f"20 ms jpeg fast: exported / boto3 tutorial w0{tag}", jpeg, "exported",
            ["boto3 w0"], 3.0),
        bar(f"20 ms jpeg fast: exported / best peer{tag}", jpeg, "exported", peers, 1.3),
        bar(f"0 ms jpeg fast: exported / best peer{tag}", jpeg0, "exported", peers0, 1.3),
    ]  # fmt: skip
    if key == "later_samples_per_s":
        return images  # a text run reads its shards once
    text_bar = bar(
        f"20 ms text: native w4 / fsspec w4{tag}", text, "lines-native w4", ["lines-fsspec w4"], 1.6
    )
    return [*images, text_bar]


# The bars are judged on the first epoch; the others are shown beside them.
TAGS = {
    "samples_per_s": "",
    "steady_samples_per_s": " (after 1st batch)",
    "later_samples_per_s": " (later epochs)",
}


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

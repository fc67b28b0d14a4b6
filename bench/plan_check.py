"""``python -m bench plan-check``: a plan for the whole machine from a trial on a smaller share
of it, checked on the whole machine (issue 56's cross-size check).

For each scenario and share: `python -m advisor recommend URI --target-cores N --target-disk 0
--export ...` runs as a user runs it, in a cgroup with a CPU quota of the share (1 core, 0.5;
`bench.cpu_quota`): the trial measures there, and the model plans for the whole machine's N
cores (a training node with no local disk: the plan streams from S3, as the data sits there).
Then, on the whole machine, outside the cgroup, the exported module's own
`make_dataloader(num_workers=w)` is swept as `bench advisor-check` sweeps it
(`bench.loader_sweep`): a fresh loader per run in a training loop whose step blocks (sleep) or
spins, RUNS interleaved runs per count and step model (the shares' modules interleaved too,
one sweep for modules that differ only in num_workers). Counts above the cores are shown, not
scored.

Per share: the score, per step model min(the planned count's median, consumer) over the best
count's within the cores, the lower of the two (the bar: >= 0.90); and the plan's predicted
rate, capped at the consumer, against what the planned count reads with each step model,
error = predicted / measured - 1 (the bar: within 15% for both): the recommendation's
`predicted_samples_per_s` for the step that spins (it holds its core) and
`predicted_blocking_samples_per_s` for the one that sleeps (it leaves its core to the
loading). Every median comes with the range of its runs.

    python -m bench plan-check [--only NAME ...] [--shares 1 0.5] [--trial-seconds S]
                               [--run-seconds S] [--runs N] [--counts W ...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from advisor.measure.hardware.host import busy_cpu_s, cpu_seconds, process_tree, usable_cores
from bench.check_data import Objects, jpeg_objects, jsonl_shards, random_objects, serve_s3
from bench.cpu_quota import CpuQuota, unavailable
from bench.loader_sweep import Runs, load_module, median_range, score, sweep
from bench.record import REPO, begin
from testing import die_with_parent

RESULTS = Path(__file__).parent / "results" / "plan_check.json"
BUCKET = "plan"
SHARES = (1.0, 0.5)
RUNS = 3
RUN_SECONDS = 6.0
TRIAL_SECONDS = 30.0
BATCH = 16
SCORE_BAR = 0.90  # the planned count's median over the best count's, each step model
RATE_BAR = 0.15  # |predicted / measured - 1| at the planned count, each step model


@dataclass(frozen=True)
class Scenario:
    """A set on S3 and the training that reads it, as a user gives them to `recommend`."""

    name: str
    latency_ms: int  # first-byte latency the proxy adds (0: the server itself)
    transform: str | None  # "module:callable"; None: the exported loader's default decoder
    consumer_rate: float  # samples/s (records/s for records) the GPU takes
    make: Callable[[], Objects] = field(compare=False)
    batch_size: int = BATCH


SCENARIOS = (
    # S3 at latency: small objects, little CPU each, 32 GETs in flight per loader process
    Scenario("s3-20KB-20ms-0.3ms", 20, "bench.transforms:burn_0_3ms", 3000.0,
             partial(random_objects, 1000, 20_000)),
    # CPU-bound JPEGs: a full Pillow decode and a resize to 224 x 224 per sample
    Scenario("jpeg-100KB-0ms-resize", 0, "bench.transforms:decode_resize", 3000.0,
             partial(jpeg_objects, 400, 100_000)),
    # WebDataset tar shards of 50 JPEGs (decoded, labels parsed: the default decoder)
    Scenario("tar-50x100KB-20ms", 20, None, 1500.0, partial(jpeg_objects, 12, 100_000, 50)),
    # text records: JSONL shards read as parsed records, a text model's batch of 256
    Scenario("jsonl-16x2000-5ms", 5, None, 100_000.0, partial(jsonl_shards, 16, 2000),
             batch_size=256),
)  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """What `recommend` answered, confined to `share` cores, planning for `target_cores`."""

    share: float
    measured_cores: float | None  # the cores the trial saw (its `measured_on`): the share
    planned_cores: float | None  # the cores the plan is for (its `hardware`)
    planned: int  # num_workers
    decided_by: list[str]  # the rules that set num_workers
    data_source: str
    predicted: float  # predicted_samples_per_s at the planned count: a step that holds its core
    expected: float  # expected_samples_per_s
    predicted_curve: dict[str, float]  # the model's loader rate per count (NW-4's evidence)
    trial_counts: dict[str, tuple[float, float, float]]  # on the share: median, low, high
    trial_seconds: tuple[float, float]  # used, budget
    model_inputs: dict[str, Any]
    settings: dict[str, Any]  # the exported config (CONFIG), num_workers left out
    module: str
    wall_s: float
    # predicted_blocking_samples_per_s: a step that leaves its core (None: an older answer)
    predicted_blocking: float | None = None

    def predicted_for(self, mode: str) -> float:
        """The plan's predicted rate for a step model: a sleeping step leaves its core."""
        if mode == "sleep" and self.predicted_blocking is not None:
            return self.predicted_blocking
        return self.predicted


@dataclass(frozen=True)
class Failure:
    """A share whose `recommend` failed: what it said last."""

    share: float
    error: str


@dataclass(frozen=True)
class ShareResult:
    scenario: str
    share: float
    consumer_rate: float
    plan: Plan | None
    error: str | None = None  # why there is no plan (the recommend command's failure)
    runs: Runs = field(default_factory=dict)  # step model -> count -> samples/s per run
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    score_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    best: dict[str, int] = field(default_factory=dict)
    # per step model at the planned count: the median and range of its runs, and the
    # prediction's error against the median (and against the runs' extremes)
    measured: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    rate_errors: dict[str, float] = field(default_factory=dict)
    rate_error_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before the trials, after
    # per step model at the planned count, medians over its runs: the cores the S3 server and
    # its proxy used, and the cores busy with anything (every core's /proc/stat)
    server_cores: dict[str, float] = field(default_factory=dict)
    busy_cores: dict[str, float] = field(default_factory=dict)

    @property
    def score_passed(self) -> bool:
        return self.score is not None and self.score >= SCORE_BAR

    @property
    def rate_verdicts(self) -> dict[str, bool]:
        """Per step model: the prediction within RATE_BAR of the planned count's median."""
        return {mode: abs(e) <= RATE_BAR for mode, e in self.rate_errors.items()}

    @property
    def rate_passed(self) -> bool:
        return bool(self.rate_errors) and all(self.rate_verdicts.values())


def recommend_command(
    s: Scenario, url: str, target_cores: float, trial_seconds: float, export: Path
) -> list[str]:
    """`python -m advisor recommend` as a user types it for `s`, planning for the target."""
    command = [
        sys.executable, "-m", "advisor", "recommend", f"s3://{BUCKET}/{s.name}/",
        "--endpoint-url", url, "--consumer-rate", f"{s.consumer_rate:g}",
        "--batch-size", str(s.batch_size), "--seconds", f"{trial_seconds:g}",
        "--target-cores", f"{target_cores:g}", "--target-disk", "0",
        "--export", str(export), "--json", "--quiet",
    ]  # fmt: skip
    return command + (["--transform", s.transform] if s.transform else [])


def confined_plan(
    s: Scenario, share: float, url: str, target_cores: float, trial_seconds: float,
    workdir: Path,
) -> Plan:  # fmt: skip
    """Run `recommend` in a cgroup of `share` cores; its answer as a Plan (RuntimeError with
    its last words where it fails)."""
    stem = f"plan_{s.name.replace('-', '_').replace('.', '_')}_{round(share * 100)}"
    export = workdir / "exports" / f"{stem}.py"
    command = recommend_command(s, url, target_cores, trial_seconds, export)
    started = time.monotonic()
    with CpuQuota(share, f"plancheck-{os.getpid()}-{stem}") as quota:
        try:
            done = subprocess.run(
                quota.wrap(command), capture_output=True, text=True, cwd=REPO,
                timeout=trial_seconds * 4 / min(share, 1.0) + 180, preexec_fn=die_with_parent,
            )  # fmt: skip
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"recommend took over {e.timeout:.0f} s") from e
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"recommend exited {done.returncode}: {done.stderr[-1500:]}")
    answer = json.loads(done.stdout)
    return _plan_of(answer, share, export, wall_s)


def _plan_of(answer: dict[str, Any], share: float, export: Path, wall_s: float) -> Plan:
    decisions = {d["name"]: d for d in answer.get("decisions", [])}
    workers = decisions.get("num_workers", {})
    curve = workers.get("evidence", {}).get("predicted_samples_per_s") or {}
    trial = answer.get("trial") or {}
    settings = json.loads(export.with_suffix(".json").read_text())
    settings.pop("num_workers", None)
    return Plan(
        share=share,
        measured_cores=(answer.get("measured_on") or {}).get("usable_cores"),
        planned_cores=(answer.get("hardware") or {}).get("usable_cores"),
        planned=int(answer["num_workers"]),
        decided_by=list(workers.get("rules", [])),
        data_source=answer["data_source"],
        predicted=float(answer["predicted_samples_per_s"]),
        expected=float(answer["expected_samples_per_s"]),
        predicted_curve={str(w): float(r) for w, r in curve.items()}
        if isinstance(curve, dict)
        else {},
        trial_counts=trial_counts(trial),
        trial_seconds=(round(trial.get("seconds_used", 0.0), 1), trial.get("seconds_budget", 0.0)),
        model_inputs=model_inputs(trial),
        settings=settings,
        module=str(export),
        wall_s=round(wall_s, 1),
        predicted_blocking=answer.get("predicted_blocking_samples_per_s"),
    )


def trial_counts(trial: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    """Per count the trial measured on the share: its slower step model's median and range."""
    out = {}
    for count in trial.get("counts", []):
        slower = min(count["steps"], key=lambda step: step["median"])
        median, low, high = (round(slower[k], 1) for k in ("median", "low", "high"))
        out[str(count["num_workers"])] = (median, low, high)
    return out


def model_inputs(trial: dict[str, Any]) -> dict[str, Any]:
    """What the model carried from the share to the whole machine, from the trial's JSON: the
    transform's CPU and the loop's overhead per sample, the storage's first byte and bandwidth
    per connection, and per measured count the medians of its slices (ms per sample: the
    training thread's, the cores' busy CPU and a worker's; the training thread's share)."""
    decode, storage = trial.get("decode") or {}, trial.get("storage") or {}
    cpu, loop = decode.get("cpu_s_per_sample"), decode.get("loop_cpu_s_per_sample")

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1e3, 4)

    def median_of(points: list[dict[str, Any]], key: str) -> float | None:
        values = [p[key] for p in points if p.get(key) is not None]
        return statistics.median(values) if values else None

    by_count: dict[str, list[dict[str, Any]]] = {}
    for point in trial.get("sweep", []):
        by_count.setdefault(str(point["num_workers"]), []).append(point)
    share = {w: median_of(points, "training_share") for w, points in by_count.items()}
    return {
        "cpu_ms_per_sample": ms(cpu),
        "overhead_ms_per_sample": None if cpu is None or loop is None else ms(max(loop - cpu, 0)),
        "first_byte_ms": ms(storage.get("first_byte_p50_s")),
        "per_connection_mb_s": storage.get("per_connection_mb_s"),
        "requests_in_flight": trial.get("requests_in_flight"),
        "per_count": {
            w: {
                "main_ms": ms(median_of(points, "main_cpu_s_per_sample")),
                "machine_ms": ms(median_of(points, "machine_cpu_s_per_sample")),
                "worker_ms": ms(median_of(points, "worker_cpu_s_per_sample")),
                "share": None if share[w] is None else round(share[w] or 0.0, 3),
            }
            for w, points in sorted(by_count.items())
        },
    }


class CoresUsed:
    """Between one `lap()` and the next: the cores the processes `pids` (with their children)
    used, and the cores busy with anything; kept per (config, step model, count) as `lap(key)`
    says."""

    def __init__(self, pids: frozenset[int]) -> None:
        self.pids = pids
        self.all_cpus = frozenset(range(os.cpu_count() or 1))
        self.laps: dict[tuple[int, str, str], list[tuple[float, float]]] = {}
        self._last: tuple[float, float, float] = self._read()

    def _read(self) -> tuple[float, float, float]:
        server = sum(cpu_seconds(p) for pid in self.pids for p in process_tree(pid))
        return time.monotonic(), server, busy_cpu_s(self.all_cpus)

    def lap(self, key: tuple[int, str, str] | None = None) -> None:
        now = self._read()
        if key is not None:
            elapsed = now[0] - self._last[0]
            used = ((now[1] - self._last[1]) / elapsed, (now[2] - self._last[2]) / elapsed)
            self.laps.setdefault(key, []).append(used)
        self._last = now

    def medians(self, config: int, count: int) -> tuple[dict[str, float], dict[str, float]]:
        """Per step model, config `config` at `count`: the median server and busy cores of its
        runs."""
        server, busy = {}, {}
        for (i, mode, w), laps in self.laps.items():
            if i == config and w == str(count):
                server[mode] = round(statistics.median(u[0] for u in laps), 2)
                busy[mode] = round(statistics.median(u[1] for u in laps), 2)
        return server, busy


def check(
    s: Scenario, plans: list[Plan | Failure], counts: list[int], cores: int, run_seconds: float,
    runs: int, load_before: float, servers: frozenset[int] = frozenset(),
) -> list[ShareResult]:  # fmt: skip
    """Sweep the plans' modules on the whole machine (one sweep per distinct config) and score
    each plan; a failed share is kept as it is."""
    made = [p for p in plans if isinstance(p, Plan)]
    distinct: list[dict[str, Any]] = []
    paths: list[Path] = []
    for plan in made:
        if plan.settings not in distinct:
            distinct.append(plan.settings)
            paths.append(Path(plan.module))
    modules = [load_module(path) for path in paths]
    for module in modules:
        module.prepare()  # a copy-local export makes its copy before the first epoch
    swept = sorted(set(counts) | {plan.planned for plan in made})

    used = CoresUsed(servers)

    def told(i: int, workers: int, mode: str, rate: float) -> None:
        used.lap((i, mode, str(workers)))
        print(f"    config {i}: {workers} workers, {mode}: {rate:,.1f}/s", flush=True)

    per_module = sweep(modules, swept, s.consumer_rate, run_seconds, runs, told) if made else []
    load = (load_before, os.getloadavg()[0])
    results = []
    for p in plans:
        if isinstance(p, Failure):
            results.append(ShareResult(s.name, p.share, s.consumer_rate, None, p.error, load=load))
            continue
        config = distinct.index(p.settings)
        mine = per_module[config]
        server, busy = used.medians(config, p.planned)
        scored = score(mine, p.planned, s.consumer_rate, within=lambda w: w <= cores)
        at = {mode: median_range(per[str(p.planned)]) for mode, per in mine.items()}
        predicted = {mode: min(p.predicted_for(mode), s.consumer_rate) for mode in at}
        errors = {mode: round(predicted[mode] / m[0] - 1, 3) for mode, m in at.items() if m[0] > 0}
        spans = {
            mode: (round(predicted[mode] / m[2] - 1, 3), round(predicted[mode] / m[1] - 1, 3))
            for mode, m in at.items()
            if m[1] > 0
        }
        result = ShareResult(
            s.name, p.share, s.consumer_rate, p, None, mine, scored.score, scored.scores,
            scored.ranges, scored.best, at, errors, spans, load, server, busy,
        )  # fmt: skip
        results.append(result)
    return results


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _cores_used(r: ShareResult, mode: str) -> str:
    if mode not in r.server_cores:
        return ""
    return f" [server {r.server_cores[mode]:.2f}, busy {r.busy_cores[mode]:.2f} cores]"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def tables(results: list[ShareResult], cores: int) -> str:
    """The result table and what each plan was built from, as Markdown."""
    head = [
        f"| scenario | share | planned (decided by) | best within {cores} cores (per step) "
        "| score (per step, range) | predicted vs measured at the planned count "
        "(error, range) [the S3 server's and the busy cores then] | bar: score; rate per step |",
        "|---|---|---|---|---|---|---|",
    ]
    built = [
        "| scenario | share | trial on the share: median (range) | model inputs (ms/sample) "
        "| the model's curve vs the sweep's median (sleep), per count |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        share = f"{r.share:g} core"
        if r.plan is None:
            head.append(f"| {r.scenario} | {share} | failed: {r.error} | | | | no; no |")
            continue
        p = r.plan
        rules = ", ".join(p.decided_by) or "-"
        best = ", ".join(f"{m} {w}" for m, w in r.best.items())
        scores = "; ".join(
            f"{m} {r.scores[m]:.2f} ({lo:.2f}-{hi:.2f})" for m, (lo, hi) in r.score_ranges.items()
        )
        rates = "; ".join(
            f"{m} {_rate(min(p.predicted_for(m), r.consumer_rate))} vs {_rate(med)} "
            f"({_rate(lo)}-{_rate(hi)}), {r.rate_errors[m]:+.0%} "
            f"({r.rate_error_ranges[m][0]:+.0%} to {r.rate_error_ranges[m][1]:+.0%})"
            + _cores_used(r, m)
            for m, (med, lo, hi) in r.measured.items()
        )
        verdicts = ", ".join(f"{m} {'yes' if ok else 'no'}" for m, ok in r.rate_verdicts.items())
        bar = f"{'yes' if r.score_passed else 'no'}; {verdicts}"
        head.append(
            f"| {r.scenario} | {share} | {p.planned} ({rules}; {p.data_source}) | {best} "
            f"| **{r.score:.2f}**: {scores} | {rates} | {bar} |"
        )
        trial = ", ".join(
            f"{w}: {_rate(m)} ({_rate(lo)}-{_rate(hi)})"
            for w, (m, lo, hi) in p.trial_counts.items()
        )
        inputs = p.model_inputs
        per = "; ".join(
            f"{w}: main {_ms(c['main_ms'])}, machine {_ms(c['machine_ms'])}, worker "
            f"{_ms(c['worker_ms'])}"
            for w, c in inputs["per_count"].items()
        )
        first = "sleep" if "sleep" in r.runs else next(iter(r.runs), "")
        curve = ", ".join(
            f"{w}: {_rate(rate)} vs {_rate(statistics.median(r.runs[first][w]))} "
            f"({rate / statistics.median(r.runs[first][w]) - 1:+.0%})"
            for w, rate in p.predicted_curve.items()
            if r.runs.get(first, {}).get(w) and statistics.median(r.runs[first][w]) > 0
        )
        built.append(
            f"| {r.scenario} | {share} | {trial} | CPU {_ms(inputs['cpu_ms_per_sample'])}, "
            f"overhead {_ms(inputs['overhead_ms_per_sample'])}; {per} | {curve or '-'} |"
        )
    return "\n".join([*head, "", *built])


def summary(results: list[ShareResult], seconds: float) -> str:
    planned = [r for r in results if r.plan is not None]
    scores = [r.score for r in planned if r.score is not None]
    errors = [abs(e) for r in planned for e in r.rate_errors.values()]
    if not scores:
        return f"no plan was made ({seconds:.0f} s)"
    per_step = {
        mode: sum(r.rate_verdicts.get(mode, False) for r in planned)
        for mode in dict.fromkeys(m for r in planned for m in r.rate_verdicts)
    }
    steps = ", ".join(f"{n} with a {mode} step" for mode, n in per_step.items())
    return (
        f"bar: {sum(r.score_passed for r in planned)} of {len(results)} plans score >= "
        f"{SCORE_BAR:.2f} (min {min(scores):.2f}); {sum(r.rate_passed for r in planned)} of "
        f"{len(results)} predict the planned count's rate within {RATE_BAR:.0%} with every step "
        f"model ({steps}; median |error| {statistics.median(errors):.0%}, largest "
        f"{max(errors):.0%}); {seconds:.0f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench plan-check", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--shares", type=float, nargs="+", default=list(SHARES),
                        help="the cores the trial is confined to (default: 1 0.5)")  # fmt: skip
    parser.add_argument("--trial-seconds", type=float, default=TRIAL_SECONDS)
    parser.add_argument("--run-seconds", type=float, default=RUN_SECONDS)
    parser.add_argument("--runs", type=int, default=RUNS, help="interleaved runs per count")
    parser.add_argument(
        "--counts", type=int, nargs="+", default=None,
        help="the counts swept (default: 0 up to the cores, and twice the cores)",
    )  # fmt: skip
    parser.add_argument(
        "--results", type=Path, default=RESULTS,
        help=f"the JSON to write, a Markdown table beside it (a folder: {RESULTS.name} in it)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.results.is_dir():
        args.results = args.results / RESULTS.name
    why = unavailable()
    if why is not None:
        print(f"plan-check confines the trial to a share of this machine, and cannot: {why}",
              file=sys.stderr)  # fmt: skip
        return 2
    cores = math.floor(usable_cores())
    if any(not 0 < share < cores for share in args.shares):
        parser.error(f"each share must be more than 0 and less than this machine's {cores} cores")
    counts = args.counts or [*range(cores + 1), 2 * cores]
    run = begin("plan-check", argv)
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
    os.environ.setdefault("GOMAXPROCS", "1")
    results: list[ShareResult] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        os.environ["HOME"] = str(workdir)  # the advisor's cache and any local copy land in here
        sets = {s.name: s.make() for s in scenarios}
        served = serve_s3(stack, BUCKET, sets, (s.latency_ms for s in scenarios))
        for s in scenarios:
            load_before = os.getloadavg()[0]
            print(f"scenario {s.name} (load {load_before:.2f}) ...", flush=True)
            plans: list[Plan | Failure] = []
            for share in args.shares:
                url = served.urls[s.latency_ms]
                try:
                    p = confined_plan(s, share, url, cores, args.trial_seconds, workdir)
                except RuntimeError as e:
                    print(f"  {share:g} core: {e}", flush=True)
                    plans.append(Failure(share, str(e)))
                    continue
                print(f"  {share:g} core (measured {p.measured_cores}, planned for "
                      f"{p.planned_cores}): trial {p.trial_counts} -> {p.planned} workers "
                      f"({', '.join(p.decided_by)}), predicted {p.predicted:,.1f}/s",
                      flush=True)  # fmt: skip
                plans.append(p)
            mine = check(s, plans, counts, cores, args.run_seconds, args.runs, load_before,
                         served.pids)  # fmt: skip
            for r in mine:
                print(f"  {json.dumps(dataclasses.asdict(r))}", flush=True)
            results += mine
    table = tables(results, cores)
    line = summary(results, time.monotonic() - started)
    print(f"\n{table}\n\n{line}")
    body = {
        "target_cores": cores, "shares": args.shares, "counts": counts,
        "results": [dataclasses.asdict(r) for r in results],
    }  # fmt: skip
    run.write(args.results, body, markdown=f"{table}\n\n{line}", indent=2)
    print(f"JSON: {args.results}")
    return 0

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
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from advisor.measure.hardware.host import busy_cpu_s, cpu_seconds, process_tree, usable_cores
from bench.check_data import serve_s3
from bench.cpu_quota import unavailable
from bench.loader_sweep import load_module, median_range, score, sweep
from bench.plan_check_plans import BUCKET, SCENARIOS, Failure, Plan, Scenario, confined_plan
from bench.plan_check_report import ShareResult, summary, tables
from bench.record import begin

RESULTS = Path(__file__).parent / "results" / "plan_check.json"
SHARES = (1.0, 0.5)
RUNS = 3
RUN_SECONDS = 6.0
TRIAL_SECONDS = 30.0


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

"""Check the advice as an outsider would: scenarios the matrix does not hold, scored on the
exported loader.

For each scenario: run the advisor's trial (on what training reads: a set that fits the disk is
copied, so the trial sweeps a local copy) and recommendation, export the loader module (making
its local copy where it has one), then
sweep the module's own `make_dataloader(num_workers=w)` for w in 0..cores, each run a fresh
loader in a training loop whose step takes `batch / consumer_rate` seconds, as a blocking wait
(sleep) and as a spinning core (a Python busy loop in the main thread, as a naive harness would
write it: it also holds the GIL, which a real `torch.cuda.synchronize` spin does not). RUNS
interleaved runs of RUN_SECONDS per count and step model, after WARM_SECONDS of warm-up; the
recommendation's score per step model is min(its median, consumer) over the best count's
within the cores; the scenario's score is the lower of the two. Every median comes with the
range of its runs. None of this shares code with the trial's measurement
(advisor/measure/trial/sweep.py).

    python -m bench advisor-check [--only NAME ...] [--trial-seconds S] [--run-seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import read_paths, recommend
from advisor.export import build_export
from advisor.measure.hardware import probe_hardware
from advisor.measure.profile import profile_dataset
from advisor.measure.trial.run import run_trial
from bench.check_data import Objects, jpeg_objects, random_objects, serve_s3
from bench.loader_sweep import load_module, score, sweep
from bench.record import begin
from native_loader import Credentials, S3Reader

RESULTS = Path(__file__).parent / "results" / "advisor_check.json"
RUNS = 3
RUN_SECONDS = 6.0
BATCH = 16


@dataclass(frozen=True)
class Scenario:
    name: str
    object_bytes: int
    objects: int
    latency_ms: int  # first-byte latency through the proxy; None-like 0: direct
    transform: str
    consumer_rate: float | None
    local: bool = False  # a local folder instead of S3
    jpeg: bool = False  # Pillow-made JPEGs (of `object_bytes` on average), not random bytes
    # the set fits the local disk (SRC-4 copies it from S3; the trial sweeps a local copy and
    # the exported module prepares one); False: no room, the training streams
    fits_disk: bool = False
    # WebDataset tar shards of `objects` JPEGs each (with .cls labels), `object_bytes` a JPEG
    tar_samples: int = 0


SCENARIOS = (
    Scenario("20KB-20ms-0.3ms-fast", 20_000, 2000, 20, "bench.transforms:burn_0_3ms", None),
    Scenario("20KB-20ms-0.3ms-800", 20_000, 2000, 20, "bench.transforms:burn_0_3ms", 800.0),
    Scenario("400KB-5ms-6ms-fast", 400_000, 300, 5, "bench.transforms:burn_6ms", None),
    Scenario("400KB-5ms-6ms-120", 400_000, 300, 5, "bench.transforms:burn_6ms", 120.0),
    Scenario("local-100KB-2ms-300", 100_000, 1000, 0, "bench.transforms:burn_2ms", 300.0, True),
    # the default decoder: a full Pillow decode of every JPEG, as a CV pipeline's first step
    Scenario("jpeg-100KB-15ms-fast", 100_000, 600, 15, "", None, jpeg=True),
    Scenario("jpeg-100KB-15ms-150", 100_000, 600, 15, "", 150.0, jpeg=True),
    # sets that fit the disk: copied before training, so the loader reads local files
    Scenario("fit-400KB-5ms-6ms-120", 400_000, 300, 5, "bench.transforms:burn_6ms", 120.0,
             fits_disk=True),
    Scenario("fit-20KB-20ms-raw-fast", 20_000, 2000, 20, "bench.transforms:raw", None,
             fits_disk=True),
    Scenario("fit-8MB-0ms-raw-fast", 8_000_000, 40, 0, "bench.transforms:raw", None,
             fits_disk=True),
    Scenario("fit-jpeg-100KB-15ms-150", 100_000, 600, 15, "", 150.0, jpeg=True, fits_disk=True),
    Scenario("fit-local-100KB-0.3ms-fast", 100_000, 1000, 0, "bench.transforms:burn_0_3ms", None,
             True, fits_disk=True),
    # the user's path: a fast GPU (a consumer rate above what the loader reaches, asked for
    # first), CPU-bound and decode-bound, streamed, copied and packed in tar shards
    Scenario("400KB-2ms-6ms-5000", 400_000, 300, 2, "bench.transforms:burn_6ms", 5000.0),
    Scenario("jpeg-100KB-0ms-3000", 100_000, 600, 0, "", 3000.0, jpeg=True),
    Scenario("fit-jpeg-100KB-15ms-3000", 100_000, 600, 15, "", 3000.0, jpeg=True,
             fits_disk=True),
    Scenario("tar-jpeg-100KB-20ms-1500", 100_000, 12, 20, "", 1500.0, jpeg=True, tar_samples=50),
)  # fmt: skip


@dataclass(frozen=True)
class CheckResult:
    scenario: str
    consumer_rate: float | None
    recommended: int
    runs: dict[str, dict[str, list[float]]]  # step model -> num_workers -> samples/s per run
    score: float  # the lower of the step models' scores
    scores: dict[str, float]  # per step model: min(rec, consumer) / min(best, consumer)
    score_ranges: dict[str, tuple[float, float]]  # rec's worst run vs best's best, and back
    best: dict[str, int]  # per step model: the best count within the cores
    trial_counts: dict[str, tuple[float, float, float]]  # the trial's median, low, high
    data_source: str
    decided_by: str  # the rule that set num_workers: "NW-3 (measured)" or "NW-4 (model)"
    read_path: str | None  # what the trial's steady-state sweep read
    prediction_error: float | None
    trial_seconds: tuple[float, float]  # used, budget
    # the advice's evidence: per measured count its median, range and the model's prediction;
    # and what the model was given (CPU and loop overhead per sample, first byte, bandwidth)
    sweep_table: dict[str, dict[str, Any]]
    model_inputs: dict[str, Any]


def check(
    scenario: Scenario, location: DatasetLocation, credentials: Credentials | None,
    trial_seconds: float, run_seconds: float, workdir: Path, counts: list[int] | None = None,
    runs_per_count: int = RUNS,
) -> CheckResult:  # fmt: skip
    hardware = probe_hardware()
    no_room = not scenario.local and not scenario.fits_disk
    if no_room and hardware.disk is not None:  # stream, as the matrix does
        hardware = dataclasses.replace(
            hardware, disk=dataclasses.replace(hardware.disk, free_bytes=0)
        )
    with S3Reader(location.reader_config(), credentials=credentials) as reader:
        profile = profile_dataset(location, reader)
    workload = Workload(
        consumer_rate=scenario.consumer_rate, batch_size=BATCH, transform=scenario.transform or None
    )
    trial = run_trial(
        location, profile, hardware, workload, credentials=credentials, seconds=trial_seconds,
        read_paths=read_paths(profile, hardware, workload),
    )  # fmt: skip
    rec = recommend(profile, hardware, workload, trial)
    nw_rules = rec.decision("num_workers").rules
    decided_by = "NW-3 (measured)" if "NW-3" in nw_rules else "NW-4 (model)"
    measured = [(c.num_workers, round(c.median), round(c.low), round(c.high)) for c in trial.counts]
    print(f"  trial {trial.seconds_used:.1f} of {trial.seconds_budget:g} s: {measured} "
          f"-> {rec.num_workers} workers, {decided_by}", flush=True)  # fmt: skip
    bundle = build_export(location, rec, workload, profile)
    path, _ = bundle.save(workdir, f"loader_{scenario.name.replace('-', '_').replace('.', '_')}")
    module = load_module(path)
    module.prepare()  # a copy-local export makes its local copy before the first epoch
    cores = max(math.ceil(hardware.usable_cores), 1)
    swept = sorted({w for w in counts or range(cores + 1) if w <= cores} | {rec.num_workers})
    consumer = scenario.consumer_rate
    (runs,) = sweep([module], swept, consumer, run_seconds, runs_per_count)
    scored = score(runs, rec.num_workers, consumer)
    scores, ranges, best = scored.scores, scored.ranges, scored.best
    return CheckResult(
        scenario.name, consumer, rec.num_workers, runs, scored.score, scores, ranges,
        best, {str(c.num_workers): (round(c.median, 1), round(c.low, 1), round(c.high, 1))
               for c in trial.counts}, rec.data_source, decided_by,
        trial.setup.read_path if trial.setup else None, rec.prediction_error,
        (round(trial.seconds_used, 1), trial.seconds_budget),
        rec.decision("num_workers").evidence.get("sweep_table", {}), _model_inputs(trial),
    )  # fmt: skip


def _model_inputs(trial: Any) -> dict[str, Any]:
    """What the model was given: the CPU per sample, and the storage probes' first byte and
    bandwidth, of the listed objects and (copy_*) of the trial's local copy where it made one;
    and per measured count what the sweep's slices measured (ms per sample: the training
    thread's, the cores' busy and a worker's CPU; the training thread's share of a core)."""
    decode, storage, copy = trial.decode, trial.storage, trial.copy_storage

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1e3, 4)

    measured = {
        str(c.num_workers): {
            "main_ms": ms(trial.main_thread_s(c.num_workers)),
            "machine_ms": ms(trial.machine_s(c.num_workers)),
            "worker_ms": ms(trial.worker_s(c.num_workers)),
            "share": trial.measured_share(c.num_workers),
        }
        for c in trial.counts
    }
    return {
        "per_count": measured,
        "cpu_ms_per_sample": None if decode is None else round(decode.cpu_s_per_sample * 1e3, 3),
        "overhead_ms_per_sample": None
        if decode is None or decode.overhead_s is None
        else round(decode.overhead_s * 1e3, 3),
        "first_byte_ms": None if storage is None else round(storage.first_byte_p50_s * 1e3, 2),
        "per_connection_mb_s": None if storage is None else round(storage.per_connection_mb_s, 1),
        "copy_first_byte_ms": None if copy is None else round(copy.first_byte_p50_s * 1e3, 3),
        "copy_per_connection_mb_s": None if copy is None else round(copy.per_connection_mb_s, 1),
    }


def _objects(s: Scenario) -> Objects:
    """(name, bytes) of the scenario's objects: one random body repeated, distinct JPEGs, or
    tar shards of `tar_samples` JPEGs each."""
    if not s.jpeg:
        return random_objects(s.objects, s.object_bytes)
    return jpeg_objects(s.objects, s.object_bytes, s.tar_samples)


def _write_local(root: Path, s: Scenario) -> Path:
    folder = root / s.name
    folder.mkdir(parents=True)
    for name, body in _objects(s):
        (folder / name).write_bytes(body)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench advisor-check", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--trial-seconds", type=float, default=30.0)
    parser.add_argument("--run-seconds", type=float, default=RUN_SECONDS)
    parser.add_argument(
        "--counts", type=int, nargs="+", default=None,
        help="sweep only these worker counts (and the recommended one): for machines with too "
        "many cores to sweep them all; the best count is then the best of these",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=RUNS, help="interleaved runs per count")
    parser.add_argument(
        "--results", type=Path, default=RESULTS,
        help=f"the JSON to write (a folder: {RESULTS.name} in it)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.results.is_dir():  # known now, not after the sweep's half hour
        args.results = args.results / RESULTS.name
    run = begin("advisor-check", argv)
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
    os.environ.setdefault("GOMAXPROCS", "1")
    results: list[CheckResult] = []
    started = time.monotonic()
    remote = [s for s in scenarios if not s.local]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        os.environ["HOME"] = str(workdir)  # the exported modules' local copies land in here
        endpoints: dict[int, str] = {}
        creds = None
        if remote:
            sets = {s.name: _objects(s) for s in remote}
            served = serve_s3(stack, "check", sets, (s.latency_ms for s in remote))
            endpoints, creds = served.urls, served.credentials
        for s in scenarios:
            print(f"scenario {s.name} ...", flush=True)
            if s.local:
                location = DatasetLocation(str(_write_local(workdir / "data", s)))
                result = check(
                    s, location, None, args.trial_seconds, args.run_seconds, workdir,
                    args.counts, args.runs,
                )  # fmt: skip
            else:
                location = DatasetLocation(
                    f"s3://check/{s.name}/", endpoint_url=endpoints[s.latency_ms]
                )
                result = check(
                    s, location, creds, args.trial_seconds, args.run_seconds, workdir,
                    args.counts, args.runs,
                )  # fmt: skip
            results.append(result)
            print(f"  {json.dumps(dataclasses.asdict(result))}", flush=True)
    print()
    print(
        "| scenario | recommended (decided by) | best within the cores (per step) "
        "| score (per step, range) | trial medians (range) | model error (chosen; per count) |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        per_step = "; ".join(
            f"{m} {r.scores[m]:.2f} ({r.score_ranges[m][0]:.2f}-{r.score_ranges[m][1]:.2f})"
            for m in r.scores
        )
        best = ", ".join(f"{m} {w}" for m, w in r.best.items())
        trial = ", ".join(
            f"{w}: {m:,.0f} ({lo:,.0f}-{hi:,.0f})" for w, (m, lo, hi) in r.trial_counts.items()
        )
        error = "-" if r.prediction_error is None else f"{r.prediction_error:+.0%}"
        per_count = ", ".join(
            f"{w}: {row['error']:+.0%}" for w, row in r.sweep_table.items()
            if row.get("error") is not None
        )  # fmt: skip
        error = f"{error}; {per_count}" if per_count else error
        score = f"**{r.score:.2f}**: {per_step}"
        rec = f"{r.recommended} ({r.decided_by}; {r.data_source}, read {r.read_path})"
        print(f"| {r.scenario} | {rec} | {best} | {score} | {trial} | {error} |")
    scores = [r.score for r in results]
    if scores:
        errors = [abs(r.prediction_error) for r in results if r.prediction_error is not None]
        error = f"{statistics.median(errors):.0%}" if errors else "-"
        every = [
            abs(row["error"]) for r in results for row in r.sweep_table.values()
            if row.get("error") is not None
        ]  # fmt: skip
        spread = (
            f"median |error| {statistics.median(every):.0%}, largest {max(every):.0%} over "
            f"{len(every)} counts"
            if every
            else "-"
        )
        print(f"\nscores: min {min(scores):.2f}, mean {statistics.fmean(scores):.2f}; model "
              f"error at the chosen count: median |error| {error}; at every measured count: "
              f"{spread}; {time.monotonic() - started:.0f} s")  # fmt: skip
    run.write(args.results, {"results": [dataclasses.asdict(r) for r in results]}, indent=2)
    print(f"JSON: {args.results}")
    return 0

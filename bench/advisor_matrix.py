"""The advisor's quality matrix: is the recommended num_workers as good as an exhaustive sweep?

For every scenario (object size x first-byte latency x per-sample CPU cost), on SeaweedFS (behind
the emulating proxy when latency > 0), and for a fast consumer (no rate: as fast as possible) and
a slow one: run the advisor's trial and recommendation, then measure num_workers in
{0, ..., cores} and {1, 2, 4, 8} as training sees them, with the trial's own training-loop
measurement (advisor/measure/trial/sweep.py: a step of batch / consumer rate after every batch, as a
blocking wait and as a spinning core, in PASSES interleaved slices of POINT_SECONDS per count and
step model, each count's figure the slower model's median). A scenario passes when the recommended
count reaches >= 90% of the best count within the cores (no more than the consumer takes counts),
and stays within the machine's cores and memory. Every figure is a median with the range of its
slices; the ratio's range pairs the recommended count's slowest slice with the best's fastest,
and the other way round. Counts beyond the cores are shown beside it, not scored.

The sets are small, so the advisor would rightly copy them to local disk first and choose
num_workers for local reads; the matrix measures streaming, so it plans for a machine with no
room to copy (local disk free = 0), which makes streaming the data source.

Every configuration reads with the reader settings the advisor recommends (its requests in
flight and byte budget per process, RD-1 and RD-2); the sweep varies num_workers only. The
proxy runs in a process of its own and, like SeaweedFS, at a higher priority than the loader: on
a 2-core machine they stand for the network and a remote server, which must neither share the
loader's GIL nor queue behind it. At 0 ms the loader reads SeaweedFS directly: a proxy that adds
nothing would still copy every byte once more on the loader's 2 cores and blur 0 workers
against 1 and 2. SeaweedFS runs with GOMAXPROCS=1, so that its
Go runtime does not spin for work on the loader's cores.

    python -m bench advisor [--quick] [--only SIZE/LATENCY_MS/CPU ...] [--trial-seconds S]
                            [--point-seconds S] [--consumers max 40]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import recommend
from advisor.demo.server import S3Server
from advisor.measure.hardware import probe_hardware
from advisor.measure.profile import profile_dataset
from advisor.measure.trial.data import TrialData
from advisor.measure.trial.results import CountRate, StepRate
from advisor.measure.trial.run import run_trial
from advisor.measure.trial.sweep import measure_counts
from bench.netem import proxy_process, raise_priority
from bench.record import begin
from native_loader import Credentials, S3Reader
from native_loader.decoders import load_transform

RESULTS = Path(__file__).parent / "results" / "advisor_matrix.json"
SWEEP = (0, 1, 2, 4, 8)  # measured beside the counts within the cores
QUALITY = 0.9
# Slices per count and step model. On 2 cores one configuration can stall for a second or two,
# so a slice must span several such spells and the median outvote a bad one.
PASSES = 3
POINT_SECONDS = 6.0
MIN_SAMPLES = 30  # per slice's steady window: 200 MB objects arrive ~5 per second
# A slice may stretch this far to reach a steady state. 8 workers reading 200 MB objects skip
# 48 batches (every reader's 4 objects of read-ahead, and the prefetch) before their window
# opens and need 32 within it: 20-40 s at 2-4 samples/s.
POINT_MAX_SECONDS = 60.0
BATCH = 16
BATCH_BYTES = 64_000_000  # large objects get smaller batches: a few batches per measured second
SLOW_RATE = 40.0  # samples/s: a consumer that any configuration but the slowest keeps up with
# (object size, objects): enough for several seconds of reading per point, bounded in memory
SIZES = {
    "10KB": (10_000, 3000),
    "100KB": (100_000, 1500),
    "1MB": (1_000_000, 400),
    "16MB": (16_000_000, 40),
    "200MB": (200_000_000, 4),
}
LATENCIES_MS = (0, 30, 100)
TRANSFORMS = {"0ms": "bench.transforms:raw", "2ms": "bench.transforms:burn_2ms",
              "8ms": "bench.transforms:burn_8ms"}  # fmt: skip
# The default run spans the ends of each axis (~60 minutes); --quick is a smaller middle.
FULL: dict[str, tuple[Any, ...]] = {
    "sizes": ("10KB", "1MB", "200MB"),
    "latencies": LATENCIES_MS,
    "transforms": ("0ms", "8ms"),
}
QUICK: dict[str, tuple[Any, ...]] = {
    "sizes": ("100KB", "16MB"),
    "latencies": (0, 30),
    "transforms": ("0ms", "2ms"),
}


@dataclass(frozen=True)
class Figure:
    """A count's samples/s as training saw it: the slower step model's median and its range."""

    median: float
    low: float
    high: float
    lower_bound: bool = False

    @classmethod
    def of(cls, c: CountRate) -> Figure:
        return cls.of_step(c.slower)

    @classmethod
    def of_step(cls, s: StepRate) -> Figure:
        return cls(round(s.median, 1), round(s.low, 1), round(s.high, 1), s.lower_bound)


@dataclass(frozen=True)
class ScenarioResult:
    size: str
    latency_ms: int
    cpu: str
    consumer_rate: float | None
    recommended_workers: int
    requests_in_flight: int  # the reader's, per process, as recommended (RD-1)
    inflight_bytes: int  # the reader's byte budget, per process, as recommended (RD-2)
    recommended: Figure  # measured at the recommended num_workers (its slower step model)
    best_workers: dict[str, int]  # per step model: the best count within the cores
    # the lower, over the step models, of min(recommended, consumer) / min(best, consumer)
    ratio: float
    ratio_low: float  # the recommended count's slowest slice against the best's fastest
    ratio_high: float  # ... and its fastest against the best's slowest
    step_ratios: dict[str, float]  # the ratio per step model
    within_cores: bool
    within_memory: bool
    passed: bool
    sweep: dict[str, Figure]  # every count measured (its slower step model), beyond the cores too
    sweep_steps: dict[str, dict[str, Figure]]  # every count, per step model
    trial_sweep: dict[str, float]  # what the advisor's own trial measured per num_workers
    trial_lower_bounds: list[int]  # trial counts that reached no steady state
    prediction_error: float | None  # the model against the trial at the recommended count
    data_source: str


def _upload(client: Any, bucket: str, sizes: tuple[str, ...]) -> None:
    client.create_bucket(Bucket=bucket)
    for name in sizes:
        size, count = SIZES[name]
        body = os.urandom(size)
        for i in range(count):
            client.put_object(Bucket=bucket, Key=f"{name}/{i:05d}.bin", Body=body)


def _scenarios(quick: bool, only: list[str] | None = None) -> list[tuple[str, int, str]]:
    """The matrix's scenarios, or those named in `only` as SIZE/LATENCY_MS/CPU (1MB/30/8ms)."""
    if only:
        return [_parse_scenario(name) for name in only]
    axes = QUICK if quick else FULL
    return [
        (size, latency, cpu)
        for size in axes["sizes"]
        for latency in axes["latencies"]
        for cpu in axes["transforms"]
    ]


def _parse_scenario(name: str) -> tuple[str, int, str]:
    size, _, rest = name.partition("/")
    latency, _, cpu = rest.partition("/")
    if size in SIZES and cpu in TRANSFORMS and latency.isdigit() and int(latency) <= 1000:
        return size, int(latency), cpu
    raise SystemExit(
        f"--only {name!r}: expected SIZE/LATENCY_MS/CPU (e.g. 1MB/30/8ms) with a size in "
        f"{list(SIZES)}, 0-1000 ms and a CPU cost in {list(TRANSFORMS)}"
    )


def _score(rate: float, consumer: float | None, target: float) -> float:
    """A rate against the verdict's target, as the bar scores it: no more than the consumer
    takes counts."""
    achieved = min(rate, consumer) if consumer else rate
    return achieved / target if target > 0 else 1.0


def run_scenario(
    endpoint_url: str,
    credentials: Credentials,
    bucket: str,
    size: str,
    cpu: str,
    trial_seconds: float,
    point_seconds: float,
    latency_ms: int,
    consumers: tuple[float | None, ...] = (None, SLOW_RATE),
    passes: int = PASSES,
    max_point_seconds: float = POINT_MAX_SECONDS,
) -> list[ScenarioResult]:
    location = DatasetLocation(f"s3://{bucket}/{size}/", endpoint_url=endpoint_url)
    hardware = _no_room_to_copy(probe_hardware())
    cores = max(math.ceil(hardware.usable_cores), 1)
    with S3Reader(location.reader_config(), credentials=credentials) as reader:
        profile = profile_dataset(location, reader)
    batch = max(1, min(BATCH, BATCH_BYTES // SIZES[size][0]))
    data = TrialData.sample(location, "binary", load_transform(TRANSFORMS[cpu]), credentials)
    # every count reads epochs of the set, as training and the trial do (one rank here)
    data = dataclasses.replace(data, epoch_objects=profile.object_count)
    results = []
    for consumer in consumers:
        # the trial measures with the consumer's step, so each consumer gets its own
        workload = Workload(batch_size=batch, transform=TRANSFORMS[cpu], consumer_rate=consumer)
        trial = run_trial(
            location, profile, hardware, workload, credentials=credentials, seconds=trial_seconds
        )
        rec = recommend(profile, hardware, workload, trial)
        workers = rec.num_workers
        counts = sorted({*range(cores + 1), *SWEEP, workers})
        _, measured = measure_counts(
            data.with_inflight(rec.requests_in_flight, rec.inflight_bytes), batch, counts,
            consumer, slice_seconds=point_seconds, max_slice_seconds=max_point_seconds,
            slices_per_mode=passes, min_samples=MIN_SAMPLES,
        )  # fmt: skip
        by_count = {c.num_workers: c for c in measured}
        scores = _scores(by_count, workers, cores, consumer)
        ratio = min(r for r, _, _, _ in scores.values())
        best_workers = {step: b for step, (_, _, _, b) in scores.items()}
        memory_ok = _memory_ok(workers, trial, hardware)
        results.append(ScenarioResult(
            size, latency_ms, cpu, consumer, workers, rec.requests_in_flight,
            rec.inflight_bytes, Figure.of(by_count[workers]), best_workers,
            round(ratio, 3), min(lo for _, lo, _, _ in scores.values()),
            min(hi for _, _, hi, _ in scores.values()),
            {step: round(r, 3) for step, (r, _, _, _) in scores.items()},
            workers <= cores, memory_ok, ratio >= QUALITY and workers <= cores and memory_ok,
            {str(w): Figure.of(c) for w, c in by_count.items()},
            {str(w): {s.step: Figure.of_step(s) for s in c.steps} for w, c in by_count.items()},
            {str(c.num_workers): round(c.median, 1) for c in trial.counts},
            [c.num_workers for c in trial.counts if c.lower_bound],
            rec.prediction_error, rec.data_source,
        ))  # fmt: skip
    return results


def _scores(
    counts: dict[int, CountRate], workers: int, cores: int, consumer: float | None
) -> dict[str, tuple[float, float, float, int]]:
    """Per step model: (the recommended count's score, its range, the best count within the
    cores). The score is min(median, consumer) over the best's; the range pairs the slowest
    slice of the recommended count with the best's fastest, and the reverse."""
    scores = {}
    for step in dict.fromkeys(s.step for c in counts.values() for s in c.steps):
        rates = {w: c.at(step) for w, c in counts.items() if w <= cores and c.at(step)}
        best_w = max(rates, key=lambda w: rates[w].median)  # type: ignore[union-attr]
        best, mine = rates[best_w], counts[workers].at(step)
        assert best is not None and mine is not None
        target = min(best.median, consumer) if consumer else best.median
        scores[step] = (
            _score(mine.median, consumer, target),
            round(_score(mine.low, consumer, min(best.high, consumer or best.high)), 3),
            round(_score(mine.high, consumer, min(best.low, consumer or best.low)), 3),
            best_w,
        )
    return scores


def _no_room_to_copy(hardware: Any) -> Any:
    if hardware.disk is None:
        return hardware
    return dataclasses.replace(hardware, disk=dataclasses.replace(hardware.disk, free_bytes=0))


def _memory_ok(workers: int, trial: Any, hardware: Any) -> bool:
    if not hardware.ram_available_bytes:
        return True
    rss = max((p.peak_worker_rss_bytes for p in trial.sweep), default=0)
    return workers * rss <= hardware.ram_available_bytes


def _rate(samples_per_s: float) -> str:
    """Samples/s for the table: a decimal where whole numbers would hide the difference."""
    return f"{samples_per_s:,.0f}" if samples_per_s >= 100 else f"{samples_per_s:.1f}"


def _figure(f: Figure) -> str:
    bound = ">=" if f.lower_bound else ""
    return f"{bound}{_rate(f.median)} ({_rate(f.low)}-{_rate(f.high)})"


def _table(results: list[ScenarioResult]) -> str:
    lines = [
        "| size | latency | CPU/sample | consumer | in flight (requests, bytes) "
        "| recommended: samples/s (range) | best within the cores, per step | ratio (range) "
        "| model error | every count: median samples/s | pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        consumer = f"{r.consumer_rate:g}/s" if r.consumer_rate else "max"
        sweep = ", ".join(
            f"{w}: {'>=' if f.lower_bound else ''}{_rate(f.median)}" for w, f in r.sweep.items()
        )
        error = "-" if r.prediction_error is None else f"{r.prediction_error:+.0%}"
        lines.append(
            f"| {r.size} | {r.latency_ms} ms | {r.cpu} | {consumer} | "
            f"{r.requests_in_flight}, {r.inflight_bytes >> 20} MiB | "
            f"{r.recommended_workers}: {_figure(r.recommended)} | "
            f"{', '.join(f'{step} {w}' for step, w in r.best_workers.items())} | "
            f"{r.ratio:.2f} ({r.ratio_low:.2f}-{r.ratio_high:.2f}) | {error} | {sweep} | "
            f"{'yes' if r.passed else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench advisor", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small subset of the matrix")
    parser.add_argument("--trial-seconds", type=float, default=None)
    parser.add_argument("--point-seconds", type=float, default=None)
    parser.add_argument("--only", nargs="+", metavar="SIZE/LATENCY_MS/CPU",
                        help="only these scenarios, e.g. 1MB/30/8ms 200MB/0/0ms")  # fmt: skip
    parser.add_argument("--consumers", nargs="+", default=["max", f"{SLOW_RATE:g}"],
                        metavar="RATE", help="consumers, samples/s ('max': none)")  # fmt: skip
    parser.add_argument("--passes", type=int, default=PASSES,
                        help="slices per count and step model")  # fmt: skip
    parser.add_argument("--max-point-seconds", type=float, default=POINT_MAX_SECONDS,
                        help="the most a slice may stretch to reach a steady state")  # fmt: skip
    args = parser.parse_args(argv)
    run = begin("advisor", argv)
    consumers = tuple(None if c == "max" else float(c) for c in args.consumers)
    scenarios = _scenarios(args.quick, args.only)
    # The sweep tries more workers than cores on purpose; torch warns about that each time.
    warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
    trial_seconds = args.trial_seconds or (10.0 if args.quick else 30.0)  # 30 s: the default
    point_seconds = args.point_seconds or POINT_SECONDS
    started = time.monotonic()
    results: list[ScenarioResult] = []
    # SeaweedFS stands for a remote server: one P keeps its Go runtime from spinning for work on
    # both of the loader's cores at nice -10 (27 % of a core against 16 % at 170 GETs/s).
    os.environ.setdefault("GOMAXPROCS", "1")
    server = S3Server()
    with server as endpoint:
        creds = Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)
        _upload(endpoint.boto3_client(), "matrix", tuple(sorted({sz for sz, _, _ in scenarios})))
        if server.pid is not None:
            raise_priority(server.pid)
        with contextlib.ExitStack() as stack:
            endpoints: dict[int, str] = {0: endpoint.url}  # by latency
            for latency in sorted({lat for _, lat, _ in scenarios} - {0}):
                # Real S3: tens of ms to first byte, ~90 MB/s per connection.
                endpoints[latency] = stack.enter_context(proxy_process(endpoint.url, latency, 90.0))
            for size, latency, cpu in scenarios:
                print(f"scenario size={size} latency={latency} ms cpu={cpu} ...", flush=True)
                new = run_scenario(
                    endpoints[latency], creds, "matrix", size, cpu, trial_seconds,
                    point_seconds, latency, consumers, args.passes, args.max_point_seconds,
                )  # fmt: skip
                for r in new:
                    consumer = r.consumer_rate or "max"
                    print(f"  consumer={consumer}: recommended {r.recommended_workers} workers x "
                          f"{r.requests_in_flight} / {r.inflight_bytes >> 20} MiB in flight "
                          f"-> ratio {r.ratio:.2f} ({r.ratio_low:.2f}-{r.ratio_high:.2f}), "
                          f"sweep {r.sweep}, trial {r.trial_sweep}, "
                          f"model error {r.prediction_error}", flush=True)  # fmt: skip
                results += new
    passed = sum(r.passed for r in results)
    print()
    print(_table(results))
    print(f"\n{passed} of {len(results)} scenarios pass (quality bar {QUALITY:.0%} of the best "
          f"count within the cores); {time.monotonic() - started:.0f} s")  # fmt: skip
    errors = [abs(r.prediction_error) for r in results if r.prediction_error is not None]
    if errors:
        print(f"model error at the recommended count: median {statistics.median(errors):.0%}")
    run.write(RESULTS, {"results": [dataclasses.asdict(r) for r in results]}, indent=2)
    print(f"JSON: {RESULTS}")
    return 0 if passed == len(results) else 1

"""The plan check's scenarios and what `recommend`, confined to a share of the machine, plans for
each: the command as a user types it, its run in a cgroup of the share, its answer as a Plan."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.check_data import Objects, jpeg_objects, jsonl_shards, random_objects
from bench.cpu_quota import CpuQuota
from bench.record import REPO
from testing import die_with_parent

BUCKET = "plan"
BATCH = 16


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

"""`python -m bench watch`, the benchmark that shows what `advisor.watch` costs a step, runs as a
user runs it and records both of its figures: the cost per step and the tree's reading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from advisor.measure.hardware.processes import READ_PERIOD_S

ROOT = Path(__file__).resolve().parents[2]


def test_bench_watch_quick_records_the_step_cost_and_the_tree_reading(tmp_path: Path) -> None:
    out = tmp_path / "watch.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "watch", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the process tree's reading with 8 workers" in done.stdout
    data = json.loads(out.read_text())
    assert len(data["cost_s_per_step"]) == 3 and data["steps"] == 5_000
    assert data["read_period_s"] == READ_PERIOD_S and len(data["reading_s"]) == 200
    # a reading of nine processes' /proc files: well under the period it is taken in
    assert 0 < min(data["reading_s"]) < READ_PERIOD_S / 10


def test_bench_watch_check_quick_records_each_scenario_against_the_bar(tmp_path: Path) -> None:
    """Two of the injected causes, one round each, as `python -m bench watch-check --quick`
    runs them: the one that offers no change (a shard for two workers) and one that does."""
    out = tmp_path / "watch_check.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "watch-check", "--quick", "--only", "1 shard",
         "latency", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| scenario | cause named | change |" in done.stdout
    data = json.loads(out.read_text())
    assert data["bar"] == 0.2
    shard, latency = data["scenarios"]["1 shard, 2 workers"], data["scenarios"]["latency, 1 worker"]
    assert shard[0]["named"] and "shards" in shard[0]["causes"] and shard[0]["change"] is None
    assert latency[0]["change"].startswith("num_workers 1 -> ")
    assert latency[0]["predicted_gain"] > 1 and latency[0]["measured_gain"] > 1

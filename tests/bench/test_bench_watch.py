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

"""`python -m bench plan-check`'s parts that need no cgroup, server or trial: the CPU quota on a
stand-in hierarchy, the score of a planned count, and the recommendation's JSON read as a plan."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.cpu_quota import CpuQuota, unavailable
from bench.loader_sweep import score
from bench.plan_check_plans import SCENARIOS, _plan_of, recommend_command
from bench.plan_check_report import ShareResult, tables


def test_a_quota_is_refused_by_name_where_no_hierarchy_is_writable(tmp_path: Path) -> None:
    why = unavailable(tmp_path)
    assert why is not None and str(tmp_path) in why and "cgroup v2" in why
    with pytest.raises(RuntimeError, match="no writable cgroup CPU controller"):
        CpuQuota(0.5, "x", base=tmp_path)


def test_a_v1_quota_is_the_share_of_the_period_and_the_child_joins_first(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    quota = CpuQuota(0.5, "plan", base=tmp_path)
    try:
        assert quota.version == 1
        assert (quota.path / "cpu.cfs_quota_us").read_text() == "50000\n"
        assert (quota.path / "cpu.cfs_period_us").read_text() == "100000\n"
        command = quota.wrap(["python", "-c", "pass"])
        assert command[:2] == ["sh", "-c"] and command[3] == str(quota.path / "cgroup.procs")
        assert command[4:] == ["python", "-c", "pass"]
    finally:
        shutil.rmtree(quota.path)  # a real cgroup's files are the kernel's: remove() rmdirs


def test_the_planned_count_is_scored_within_the_cores_capped_at_the_consumer() -> None:
    runs = {
        "sleep": {"0": [100.0, 110.0], "1": [200.0, 210.0], "2": [300.0, 320.0],
                  "4": [400.0, 410.0]},
        "spin": {"0": [90.0, 95.0], "1": [180.0, 190.0], "2": [250.0, 260.0], "4": [300.0]},
    }  # fmt: skip
    scored = score(runs, 1, None, within=lambda w: w <= 2)  # 4 is above the cores: not scored
    assert scored.best == {"sleep": 2, "spin": 2}
    assert scored.scores["sleep"] == pytest.approx(205 / 310, abs=1e-3)
    assert scored.ranges["sleep"] == (round(200 / 320, 3), round(210 / 300, 3))
    assert scored.scores["spin"] == pytest.approx(185 / 255, abs=1e-3)
    assert scored.score == scored.scores["sleep"]  # the lower of the two
    assert score(runs, 1, 150.0, within=lambda w: w <= 2).score == 1.0  # both keep up


def test_the_recommendations_json_is_read_as_a_plan(tmp_path: Path) -> None:
    export = tmp_path / "plan.py"
    export.with_suffix(".json").write_text(json.dumps({"num_workers": 2, "uri": "s3://b/p/"}))
    answer = {
        "num_workers": 2, "data_source": "stream", "predicted_samples_per_s": 500.0,
        "predicted_blocking_samples_per_s": 560.0, "expected_samples_per_s": 500.0,
        "hardware": {"usable_cores": 2.0}, "measured_on": {"usable_cores": 0.5},
        "decisions": [{"name": "num_workers", "rules": ["NW-1", "NW-4"],
                       "evidence": {"predicted_samples_per_s": {"1": 260.0, "2": 500.0}}}],
        "trial": {
            "seconds_used": 28.0, "seconds_budget": 30.0, "requests_in_flight": 32,
            "decode": {"cpu_s_per_sample": 0.003, "loop_cpu_s_per_sample": 0.0032},
            "storage": {"first_byte_p50_s": 0.02, "per_connection_mb_s": 80.0},
            "counts": [{"num_workers": 1, "steps": [
                {"step": "sleep", "median": 130.0, "low": 120.0, "high": 140.0},
                {"step": "spin", "median": 120.0, "low": 110.0, "high": 125.0}]}],
            "sweep": [{"num_workers": 1, "main_cpu_s_per_sample": 0.0001,
                       "machine_cpu_s_per_sample": 0.004, "worker_cpu_s_per_sample": 0.0033,
                       "training_share": 0.1}],
        },
    }  # fmt: skip
    plan = _plan_of(answer, 0.5, export, 40.0)
    assert (plan.measured_cores, plan.planned_cores, plan.planned) == (0.5, 2.0, 2)
    assert plan.decided_by == ["NW-1", "NW-4"] and plan.predicted_curve == {"1": 260, "2": 500}
    assert plan.trial_counts == {"1": (120.0, 110.0, 125.0)}  # the slower step model's
    assert plan.settings == {"uri": "s3://b/p/"}  # the same loader but for its count
    # each step model is held to its own prediction: a sleeping step leaves its core
    assert (plan.predicted_for("spin"), plan.predicted_for("sleep")) == (500.0, 560.0)
    inputs = plan.model_inputs
    assert inputs["overhead_ms_per_sample"] == pytest.approx(0.2)
    assert inputs["per_count"]["1"]["machine_ms"] == pytest.approx(4.0)
    failed = ShareResult("s", 1.0, 100.0, None, "recommend exited 2")
    assert "failed: recommend exited 2" in tables([failed], 2)


def test_the_trial_plans_for_the_target_and_streams_as_the_data_sits() -> None:
    s = SCENARIOS[0]
    command = recommend_command(s, "http://127.0.0.1:1", 2.0, 30.0, Path("/tmp/x.py"))
    assert command[command.index("--target-cores") + 1] == "2"
    assert command[command.index("--target-disk") + 1] == "0"
    assert command[command.index("--transform") + 1] == s.transform

"""The busy CPU per sample as parts that add up (advisor/measure/trial/cpu_parts.py), and the
cores' ceiling that shows them: 6.9 ms of busy CPU against a 1.4 ms decode is explained."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.decide.bottleneck import trial_ceilings
from advisor.decide.rules.registry import evaluate
from advisor.measure.trial.cpu_parts import REST, busy_parts
from advisor.measure.trial.probe_results import DecodeCost
from tests.builders import make_ctx


def _costed(ctx, machine_s: float, main_s: float):  # type: ignore[no-untyped-def]
    """`ctx` whose trial's slices measured `machine_s` busy CPU per sample (`main_s` of it in
    the training thread), and a 1.4 ms decode in a 2.0 ms read-and-decode loop."""
    trial = ctx.trial
    sweep = tuple(
        dataclasses.replace(p, machine_cpu_s_per_sample=machine_s if p.num_workers else 0.0045,
                            main_cpu_s_per_sample=main_s if p.num_workers else 0.003)
        for p in trial.sweep
    )  # fmt: skip
    decode = DecodeCost("default", 500, 0.0014, 150e3, loop_cpu_s_per_sample=0.002)
    return dataclasses.replace(ctx, trial=dataclasses.replace(trial, sweep=sweep, decode=decode))


def test_the_busy_cpu_per_sample_is_parts_that_add_up() -> None:
    ctx = _costed(make_ctx({"trial": {}, "hardware": {"cores": 2}}), 0.0069, 0.0009)
    assert ctx.trial is not None
    parts = busy_parts(ctx.trial, 1)
    assert sum(p.s_per_sample for p in parts) == pytest.approx(0.0069)
    named = {p.name: p.s_per_sample for p in parts}
    assert named["decode"] == pytest.approx(0.0014) and named["read"] == pytest.approx(0.0006)
    # the sweep's estimate of the workers' hand-over: busy 6.9 ms - 4.5 ms alone - 0.9 ms taken
    assert named["collate and hand-over in the workers"] == pytest.approx(0.0015)
    assert named["taking batches in the training thread"] == pytest.approx(0.0009)
    assert parts[-1].name == REST and parts[-1].s_per_sample == pytest.approx(0.0025)
    # with 0 workers the training thread collates: its 3 ms less the 2 ms loop
    alone = {p.name: p.s_per_sample for p in busy_parts(ctx.trial, 0)}
    assert alone["collate in the training thread"] == pytest.approx(0.001)
    assert sum(alone.values()) == pytest.approx(0.0045)


def test_parts_measured_apart_never_sum_past_the_total() -> None:
    ctx = _costed(make_ctx({"trial": {}, "hardware": {"cores": 2}}), 0.0016, 0.0009)
    assert ctx.trial is not None
    parts = busy_parts(ctx.trial, 1)
    assert sum(p.s_per_sample for p in parts) == pytest.approx(0.0016)
    assert all(p.s_per_sample >= 0 for p in parts)


def test_the_cores_ceiling_names_its_parts() -> None:
    ctx = _costed(make_ctx({"trial": {}, "hardware": {"cores": 2}}), 0.0069, 0.0009)
    state = evaluate(ctx).state
    cores = next(c for c in trial_ceilings(ctx, state, 1) if c.stage == "cores")
    assert "6.9 ms busy CPU per sample: decode 1.4 ms + read 600 µs + " in cores.how, cores.how
    assert f"{REST} 2.5 ms" in cores.how

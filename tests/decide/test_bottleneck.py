"""The bottleneck named from measurements (advisor/decide/bottleneck.py): from a trial at
the recommended count, and from the user's own loop; and MEAS-4 heeding it."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from advisor.decide.bottleneck import Bottleneck, of_loop, of_trial
from advisor.decide.recommend import Recommendation, recommend
from advisor.decide.rules import Context, Key, evaluate
from advisor.measure.loop.results import LoopSummary, Spread
from advisor.measure.trial.probe_results import StorageProbe
from advisor.report.recommendation import recommendation_summary
from tests.builders import make_ctx

# 8 workers measured at 1,900 samples/s; 4 ms of CPU per sample on 8 loading cores allow 2,000
DECODE_BOUND: dict[str, Any] = {
    "trial": {"rates": {0: 230.0, 1: 250.0, 2: 480.0, 4: 950.0, 8: 1900.0}},
    "workload": {"consumer_rate": 100_000.0},
}


def with_trial(ctx: Context, **changes: Any) -> Context:
    assert ctx.trial is not None
    return dataclasses.replace(ctx, trial=dataclasses.replace(ctx.trial, **changes))


def with_main_thread(ctx: Context, main_s: float) -> Context:
    """The sweep measured the training thread's CPU per sample taking the workers' batches."""
    assert ctx.trial is not None
    sweep = tuple(dataclasses.replace(p, main_cpu_s_per_sample=main_s) for p in ctx.trial.sweep)
    return with_trial(ctx, sweep=sweep)


def judged(ctx: Context) -> tuple[Bottleneck | None, tuple[str, ...]]:
    evaluation = evaluate(ctx)
    assert evaluation.state[Key.NUM_WORKERS] == 8
    return of_trial(ctx, evaluation.state), evaluation.path


def test_decode_is_named_where_the_rate_sits_at_the_decode_ceiling() -> None:
    found, path = judged(make_ctx(DECODE_BOUND))
    assert found is not None and found.stage == "decode"
    assert found.measured_samples_per_s == 1900.0
    decode = next(c for c in found.ceilings if c.stage == "decode")
    assert decode.samples_per_s == pytest.approx(2000.0)
    assert "95% of its ceiling" in found.reason and "4.0 ms CPU per sample" in found.reason
    # the default probe's curve still rose: storage is shown, as a lower bound, never named
    storage = next(c for c in found.ceilings if c.stage == "storage")
    assert storage.lower_bound and "still rising" in storage.how
    assert "MEAS-4" in path


def test_storage_is_named_where_the_probe_saturated_at_the_measured_rate() -> None:
    curve = ((1, 85.0, 0.6), (2, 170.0, 1.2), (4, 290.0, 1.95), (8, 292.0, 1.95), (16, 293, 1.95))
    probe = StorageProbe(20, 20 * 150 * 10**6, 0.025, 0.06, 85.0, curve)
    ctx = with_trial(make_ctx(DECODE_BOUND), storage=probe)
    found, path = judged(ctx)
    assert found is not None and found.stage == "storage", found
    assert next(c for c in found.ceilings if c.stage == "storage").samples_per_s == 1950.0
    assert "MEAS-4" not in path  # decoding offline would not lift a storage limit


def test_a_handover_ceiling_nearer_than_decode_takes_the_decode_advice_back() -> None:
    """The training thread spends 0.51 ms per sample taking the workers' batches (a ceiling of
    1,950 samples/s): decoding offline lifts the decode ceiling (2,000), not that one. Before
    the bottleneck was named, MEAS-4 fired here (1,900 is over 80% of the decode ceiling)."""
    ctx = with_main_thread(make_ctx(DECODE_BOUND), 1 / 1950)
    found, path = judged(ctx)
    assert found is not None and found.stage == "handover"
    assert found.words == "collate or transfer between processes"
    assert "MEAS-4" not in path


def test_a_rate_far_below_every_ceiling_names_nothing() -> None:
    case = {**DECODE_BOUND, "trial": {"rates": {0: 100.0, 1: 150.0, 2: 250.0, 4: 350.0, 8: 400.0}}}
    found, path = judged(make_ctx(case))
    assert found is not None and found.stage == "unexplained"
    assert "under 80% of every measured ceiling" in found.reason
    assert "decode 2,000 samples/s" in found.reason
    assert "MEAS-4" not in path


def test_a_loader_that_keeps_up_is_bound_by_the_step() -> None:
    case = {"trial": {"rates": {0: 990.0, 1: 1000.0}}, "workload": {"consumer_rate": 1000.0}}
    ctx = make_ctx(case)
    found = of_trial(ctx, evaluate(ctx).state)
    assert found is not None and found.stage == "step"


def test_no_trial_names_no_bottleneck_and_the_recommendation_carries_it() -> None:
    ctx = make_ctx({"workload": {"consumer_rate": 100_000.0}})
    assert of_trial(ctx, evaluate(ctx).state) is None
    ctx = make_ctx(DECODE_BOUND)
    rec = recommend(ctx.profile, ctx.hardware, ctx.workload, ctx.trial)
    assert rec.bottleneck is not None and rec.bottleneck.stage == "decode"
    assert "bottleneck:   decode or transform: " in recommendation_summary(rec)
    again = Recommendation.from_dict(json.loads(rec.to_json()))
    assert again == rec


def summary(waits: float, rate: float, cpu: float | None) -> LoopSummary:
    return LoopSummary(
        "loader", 100, 1000, 10.0, rate, waits, None, None, None, None, 0.1, None, cpu, 0, None,
        "seconds",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("waits", "rate", "cpu", "workers", "stage"),
    [
        (0.02, 100.0, 0.001, 0, "step"),  # under 5% waiting: not input-bound
        (0.5, 190.0, 0.01, 4, "cores"),  # 1.9 of 2 cores busy while the step waits
        (0.5, 90.0, 0.01, 1, "decode"),  # its one worker busy 90% of the time, a core left
        (0.6, 55.0, 0.01, 0, "decode"),  # the main process loads 92% of the time it waits
        (0.6, 55.0, 0.0005, 0, "storage"),  # ...but only 5% busy: it waits on I/O
        (0.6, 55.0, 0.0005, None, "unexplained"),  # idle, and its processes not known
        (0.6, 55.0, None, 0, "unexplained"),  # CPU not measured
    ],
)
def test_the_users_loop_is_judged_from_its_cpu_and_its_waits(
    waits: float, rate: float, cpu: float | None, workers: int | None, stage: str
) -> None:
    found = of_loop(summary(waits, rate, cpu), usable_cores=2, workers=workers)
    assert found is not None and found.stage == stage, found
    assert found.origin == "loop"


@pytest.mark.timing
def test_no_rate_reads_above_its_ceiling_in_the_users_loop() -> None:
    """The README's loader on the demo (0 workers, a 300 samples/s step): 113 samples/s, 60% of
    each step waiting, 5.5 ms of CPU per sample with its reader's threads. The main process
    loads only while the loop waits, 5.3 ms a sample, so the ceiling was "111% of its
    ceiling" when taken from the CPU; now the main process's own time caps it: 100%."""
    found = of_loop(summary(0.6, 113.0, 0.0055), usable_cores=2, workers=0)
    assert found is not None and found.stage == "decode", found
    assert "100% of its ceiling" in found.reason and "5.3 ms a sample" in found.reason, found
    for c in found.ceilings:
        assert found.measured_samples_per_s <= c.samples_per_s * 1.05
    # a ceiling with workers that the rate exceeds (a cost timed wrong) is left out, and named
    over = of_loop(
        summary(
            0.5,
            190.0,
            0.02,
        ),
        usable_cores=4,
        workers=2,
    )
    assert over is not None and "left out: the decode ceiling of 100 samples/s" in over.reason


def test_a_step_that_leaves_the_gpu_idle_is_named_as_the_host_side() -> None:
    """As diagnose measured on an H100: 4% waiting, the GPU busy 13% (0-60%) of the time."""
    busy = Spread(13.0, 0.0, 60.0, 38)
    found = of_loop(
        dataclasses.replace(summary(0.04, 1468.0, 0.005), gpu_utilization=busy), usable_cores=16
    )
    assert found is not None and found.stage == "step"
    assert "the GPU ran kernels only 13% of the time" in found.reason
    fed = dataclasses.replace(summary(0.04, 1468.0, 0.005), gpu_utilization=Spread(97, 90, 99, 9))
    found = of_loop(fed, usable_cores=16)
    assert found is not None and "GPU ran kernels" not in found.reason


class Sleepy:
    """A loader read in the main process whose batches each take 20 ms of waiting on I/O."""

    def __iter__(self) -> Any:
        for i in range(10_000):
            time.sleep(0.02)
            yield [i] * 8


@pytest.mark.timing
def test_a_real_loop_that_waits_while_its_loader_idles_names_storage() -> None:
    """On a machine whose cores other work keeps busy, an idle loader may be starved of CPU
    rather than waiting: then nothing is named."""
    from advisor.core.bounds import LoopLimits
    from advisor.diagnosis import diagnose
    from advisor.report.diagnosis import diagnosis_lines

    limits = LoopLimits(
        max_batches=60, max_seconds=1.5, batch_timeout_s=5, first_batch_timeout_s=10
    )
    result = diagnose(Sleepy(), seconds_per_batch=0.02, limits=limits)
    found = result.bottleneck
    assert found is not None and found.stage in ("storage", "unexplained"), found
    if found.stage == "unexplained":
        assert "cannot tell apart" in found.reason
    assert diagnosis_lines(result)[1] == found.line
    assert result.to_dict()["bottleneck"]["stage"] == found.stage


def test_a_loader_measured_at_no_cpu_idles() -> None:
    """A loader that only sleeps can measure 0 CPU per sample at the clock's resolution: that
    is a measurement (it idles), not a missing one."""
    quiet = of_loop(summary(0.6, 55.0, 0.0), usable_cores=2, workers=0, machine_busy=0.3)
    assert quiet is not None and quiet.stage == "storage" and quiet.ceilings == ()
    busy = of_loop(summary(0.6, 55.0, 0.0), usable_cores=2, workers=0, machine_busy=0.95)
    assert busy is not None and "cannot tell apart" in busy.reason
    unknown = of_loop(summary(0.6, 55.0, None), usable_cores=2, workers=0)
    assert unknown is not None and "was not measured" in unknown.reason


def test_an_idle_loader_on_busy_cores_is_not_named() -> None:
    found = of_loop(summary(0.6, 55.0, 0.0005), usable_cores=2, workers=0, machine_busy=0.95)
    assert found is not None and found.stage == "unexplained"
    quiet = of_loop(summary(0.6, 55.0, 0.0005), usable_cores=2, workers=0, machine_busy=0.3)
    assert quiet is not None and quiet.stage == "storage"


def test_meas4_states_the_ceiling_the_measurements_named() -> None:
    """The decode loop measured 3.8 ms of CPU per sample where the model's figure is 4.0 ms:
    the advice states the measured ceiling (8 cores / 3.8 ms), not the model's 2,000 samples/s.
    On a 2-core machine the model's ceiling sat at half the rate the sweep measured, and the
    advice read "caps the loader at 280 samples/s ...; it reads 516 samples/s"."""
    ctx = make_ctx(DECODE_BOUND)
    assert ctx.trial is not None and ctx.trial.decode is not None
    ctx = with_trial(
        ctx, decode=dataclasses.replace(ctx.trial.decode, loop_cpu_s_per_sample=0.0038)
    )
    evaluation = evaluate(ctx)
    (advice,) = [f for f in evaluation.advisories if f.rule_id == "MEAS-4"]
    assert "caps the loader at 2,105 samples/s with 8 workers" in advice.rationale
    assert "3.8 ms CPU per sample" in advice.rationale
    assert advice.evidence["cpu_bound_samples_per_s"] == pytest.approx(8 / 0.0038)


def test_an_unmeasured_count_the_ceilings_leave_room_for_is_named_not_decode() -> None:
    """The independent run's miss: on 2 cores a 30 s trial measured 0 and 1 worker (140 and
    146 samples/s) for a 5,000/s GPU, while the cores' busy CPU per sample measured at 1
    worker allows 270. No card may then call decode the bottleneck or advise moving it
    offline, and the choice is not 'high': the count above was not measured."""
    case = {
        "hardware": {"cores": 2},
        "workload": {"consumer_rate": 5000.0, "gpus_per_node": 1},
        "trial": {"rates": {0: (140.0, 141.0), 1: (145.0, 147.0)}},
    }
    ctx = make_ctx(case)
    assert ctx.trial is not None
    sweep = tuple(
        dataclasses.replace(p, machine_cpu_s_per_sample=2 / 270, main_cpu_s_per_sample=1e-4)
        for p in ctx.trial.sweep
    )
    ctx = with_trial(ctx, sweep=sweep)
    evaluation = evaluate(ctx)
    found = of_trial(ctx, evaluation.state)
    assert found is not None and found.stage == "workers", found
    assert "270 samples/s" in found.reason and "no count above it was measured" in found.reason
    assert "MEAS-4" not in evaluation.path
    nw = next(f for f in evaluation.fired if f.rule_id == "NW-3")
    assert nw.confidence == "medium"
    assert "were not measured within the trial" in nw.rationale
    assert nw.evidence["unmeasured_ceiling_samples_per_s"] == pytest.approx(270.0)


def test_a_ceiling_the_measurement_exceeds_is_left_out_and_named() -> None:
    """A decode ceiling under the measured rate (the decode probe timed on a busier machine)
    was estimated wrong: the bottleneck is not judged by it, and it says so."""
    case = {**DECODE_BOUND, "trial": {"rates": {0: 230.0, 1: 250.0, 2: 480.0, 4: 950.0, 8: 2600.0}}}
    found, path = judged(make_ctx(case))
    assert found is not None and found.stage != "decode"
    assert "left out: the decode ceiling" in found.reason
    assert all(c.stage != "decode" for c in found.ceilings)
    assert "MEAS-4" not in path


def test_a_repeat_that_names_another_stage_was_said_to_be_within_the_noise() -> None:
    """Two trials on the same inputs (a folder, a 300 samples/s step, 2 cores) chose 0 workers
    at 287 (slices 282-292) and 282 (272-293): the first named the step, the second no stage
    and input-bound, each with confidence. Both slice ranges lie on both sides of the 285
    that keeps up with the step, and each run now says so: a repeat may name the other."""
    stages = set()
    for rates in ({0: (282.0, 292.0), 1: (285.0, 290.0)}, {0: (272.0, 293.0), 1: (279.0, 279.0)}):
        case = {"trial": {"rates": rates}, "hardware": {"cores": 2}}
        ctx = make_ctx({**case, "workload": {"consumer_rate": 300.0}})
        evaluation = evaluate(ctx)
        found = of_trial(ctx, evaluation.state)
        assert found is not None
        stages.add(found.stage)
        line = "285 samples/s (keeping up with the 300 samples/s step, within 5%)"
        assert found.within_noise == (line,)
        assert (
            "within the noise" in found.reason and "a repeat may name another stage" in found.reason
        )
        assert Bottleneck.from_dict(json.loads(json.dumps(found.to_dict()))) == found
        input_bound = [f for f in evaluation.fired if f.rule_id == "MEAS-3"]
        for finding in input_bound:
            assert "Within the noise" in finding.rationale and finding.evidence["within_noise"]
    assert stages == {"step", "unexplained"}  # what the two runs named: now each says why
    # slices all on one side of every line: nothing is said
    ctx = make_ctx({"trial": {"rates": {0: (250.0, 260.0)}}, "workload": {"consumer_rate": 300.0}})
    found = of_trial(ctx, evaluate(ctx).state)
    assert found is not None and found.within_noise == () and "noise" not in found.reason

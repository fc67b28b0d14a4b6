"""One judge for every front (`advisor.decide.judge`): one real loop, run once, judged as
`diagnose`, `advisor.watch` and a training framework's callback judge it, reads the same
verdict, bottleneck and change; and `diagnose` names the change `watch` names (issue #54's
case: a 0-worker DataLoader whose samples each wait 4 ms)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from torch.utils.data import DataLoader

from advisor.core.bounds import LoopLimits
from advisor.diagnosis import as_step, diagnose
from advisor.diagnosis.loop import judged
from advisor.measure.loop.run import PacedStep, run_loop
from advisor.measure.loop.watch import WatchedLoop
from advisor.report.watch import watch_lines
from advisor.watcher import Doctor
from bench.watch_check import Sleepy

STEP_S = 0.01  # 8 samples a step: 800 samples/s with loading free
WHOLE_EPOCH = LoopLimits(
    max_batches=1000, max_seconds=30.0, batch_timeout_s=5, first_batch_timeout_s=10
)


@pytest.mark.timing
def test_every_front_judges_one_loop_alike() -> None:
    pytest.importorskip("pytorch_lightning")
    from advisor.integrations.lightning import WatchCallback

    loop = WatchedLoop(DataLoader(Sleepy(400, 0.004), batch_size=8))
    for _ in loop:
        time.sleep(STEP_S)
    run = loop.run()
    assert run.others_cores is not None  # the instrument measured the machine's other work
    diagnosed = judged(run, loop.facts)
    watched = Doctor(out=None).report(loop)
    callback = WatchCallback(out=None)
    callback.loop = loop
    callback.on_train_epoch_end(None, None)  # the callback's own end of an epoch
    (called_back,) = callback.reports

    for other in (watched, called_back):
        assert other.verdict == diagnosed.verdict
        assert other.bottleneck == diagnosed.bottleneck
        assert other.change == diagnosed.change
        assert other.trips == diagnosed.trips
    assert diagnosed.change is not None and diagnosed.change.setting == "num_workers"
    # rendered: the judge's three lines, as `diagnose` prints them and `watch` says them
    shown = str(diagnosed).splitlines()[:3]
    assert shown == watch_lines(watched)[:3] == watch_lines(called_back)[:3]
    assert shown[0].startswith("input-bound: ") and shown[1].startswith("bottleneck: ")
    assert shown[2].startswith("change: num_workers 0 -> "), shown


@pytest.mark.timing
def test_diagnose_names_the_change_watch_names_and_the_changed_loader_reads_it() -> None:
    """0 workers, samples that wait 4 ms each (32 ms a batch of 8) and a 10 ms step: the loop
    waits most of each step; `diagnose` advises more workers with the rate the model gives
    them, which the changed loader then reads in the same loop, within 20%."""
    result = diagnose(
        DataLoader(Sleepy(400, 0.004), batch_size=8), seconds_per_batch=STEP_S,
        limits=WHOLE_EPOCH,
    )  # fmt: skip
    assert result.verdict is not None and result.verdict.level == "highly input-bound"
    change = result.change
    assert change is not None and change.setting == "num_workers", str(result)
    assert change.now == 0 and change.to >= 2
    assert f"change: {change.line}" in str(result).splitlines()
    after = diagnose(
        DataLoader(Sleepy(400, 0.004), batch_size=8, num_workers=change.to),
        seconds_per_batch=STEP_S, limits=WHOLE_EPOCH,
    )  # fmt: skip
    measured = after.summary.overall_samples_per_s
    assert measured is not None
    before = change.measured_samples_per_s
    assert measured / before > 1.3, (before, measured)
    assert abs(change.predicted_samples_per_s / measured - 1) <= 0.2, (change, measured)


@pytest.mark.timing
def test_a_spinning_step_holds_its_core_in_diagnose_as_the_model_takes_it() -> None:
    """The step says its kind: spun (CUDA's default synchronisation), the loop's run carries
    the step's CPU as most of its time, which the change's model takes as a step that holds
    its core; slept, little of it."""
    limits = replace(WHOLE_EPOCH, max_batches=40)
    batches = [[0] * 8] * 40
    spun, _ = run_loop(batches, as_step(seconds_per_batch=STEP_S, spins=True), limits)
    slept, _ = run_loop(batches, PacedStep(seconds=STEP_S), limits)
    assert spun.step_cpu_s is not None and slept.step_cpu_s is not None
    assert spun.step_cpu_s / sum(spun.step_s) > 0.5
    assert slept.step_cpu_s / sum(slept.step_s) < 0.2
    with pytest.raises(ValueError, match="exactly one"):
        PacedStep(seconds=STEP_S, samples_per_s=800.0)

"""`advisor.decide.watching`: the change `watch` offers, judged from a recorded loop (no timing:
the loops are written out, step by step)."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.core.model import predict
from advisor.decide.facts.costs import loop_costs
from advisor.decide.judge import judge
from advisor.decide.watching import proof, steady_rate, step_rate
from advisor.measure.loop.handover import Handover
from advisor.measure.loop.results import LoopRun, LoopSummary
from advisor.measure.loop.watch import LoaderFacts

FACTS = LoaderFacts(
    num_workers=2, prefetch_factor=2, pin_memory=False, persistent_workers=False, batch_size=8,
    dataset="Data", shards=None, tensors_per_batch=1, batch_bytes=256, shm_free_bytes=None,
    open_files_limit=None,
)  # fmt: skip


def restarting(
    epochs: int, stall_s: float, second_s: float = 0.002, wait_s: float = 0.002
) -> LoopRun:
    """`epochs` epochs of 20 batches of 8 samples and a 10 ms step; each epoch's first batch
    after `stall_s` (the first worker's start), its second after `second_s` (the second
    worker's), every other after `wait_s`."""
    epoch = [second_s] + [wait_s] * 18
    waits = epoch + [stall_s, *epoch] * (epochs - 1)
    return LoopRun(
        label="yours", time_to_first_batch_s=stall_s, first_batch_samples=8,
        wait_s=tuple(waits), step_s=(0.01,) * len(waits), samples=(8,) * len(waits),
        ended="epoch", cpu_s=0.0, peak_rss_bytes=0,
        epoch_starts=tuple(19 + 20 * e for e in range(epochs - 1)),
    )  # fmt: skip


def test_workers_started_every_epoch_get_persistent_workers_with_the_epochs_rate() -> None:
    run = restarting(3, stall_s=0.5, second_s=0.1)
    assert run.epoch_start_waits(2) == [(0.5, 0.1)] * 3
    report = judge(run, FACTS, usable_cores=2)
    change = report.change
    assert change is not None and change.setting == "persistent_workers"
    assert (change.now, change.to) == (False, True)
    # 480 samples over the whole run: every first batch, wait and step
    seconds = 0.5 + sum(run.wait_s) + sum(run.step_s)
    assert change.measured_samples_per_s == pytest.approx(480 / seconds)
    # with the workers kept, an epoch's first batch takes one batch of a worker at its share
    # of the steady rate (2 x 8 samples at 472 over the time after the first batch), and its
    # second the steady wait
    one_batch = 2 * 8 / (472 / (sum(run.wait_s) + sum(run.step_s)))
    saved = 3 * (0.5 + 0.1 - one_batch - 0.002)
    after = seconds - saved
    assert change.predicted_samples_per_s == pytest.approx(480 / after)
    waited = 0.5 + sum(run.wait_s)
    assert change.measured_wait_share == pytest.approx(waited / seconds)
    assert change.predicted_wait_share == pytest.approx((waited - saved) / after)
    assert f"cost {round(saved / 3 * 1000)} ms of waiting an epoch (over 3)" in change.line
    restart = next(t.line for t in report.trips if t.cause == "restart")
    assert "each epoch's first batch came after 500 ms (median of 3)" in restart


def test_no_persistent_workers_change_where_they_persist_or_the_start_is_in_the_noise() -> None:
    persistent = dataclasses.replace(FACTS, persistent_workers=True)
    assert judge(restarting(3, stall_s=0.5), persistent, usable_cores=2).change is None
    quick = judge(restarting(3, stall_s=0.005), FACTS, usable_cores=2)
    assert quick.change is None and not quick.trips
    in_process = dataclasses.replace(FACTS, num_workers=0)
    assert judge(restarting(3, stall_s=0.5), in_process, usable_cores=2).change is None


def test_the_proof_measures_against_what_the_change_was_predicted_from() -> None:
    change = judge(restarting(2, stall_s=0.5, second_s=0.1), FACTS, usable_cores=2).change
    assert change is not None and change.setting == "persistent_workers"
    # the kept workers' loader: they start once, its first batch after 0.5 s and its second
    # after 0.1 s, then the next epoch's first batch after a steady wait
    steady = restarting(2, stall_s=0.002)
    kept = dataclasses.replace(steady, time_to_first_batch_s=0.5, wait_s=(0.1, *steady.wait_s[1:]))
    shown = proof(change, kept, workers=2)
    assert shown.before_samples_per_s == change.measured_samples_per_s
    assert shown.before_wait_share == change.measured_wait_share
    # the second worker's first batch is its one start too: left out with the first
    looped = sum(kept.wait_s[1:]) + sum(kept.step_s[1:])
    assert shown.after_samples_per_s == pytest.approx(8 * 38 / looped)
    assert shown.after_wait_share == pytest.approx(sum(kept.wait_s[1:]) / looped)
    gain = 8 * 38 / looped / change.measured_samples_per_s
    assert f"{gain:.2f}x measured" in shown.line


def in_process(batches: int = 100, wait_s: float = 0.002, step_s: float = 0.005) -> LoopRun:
    """A loader with no workers, 4 samples a batch made in `wait_s` of the training thread's
    CPU (nothing else), and a step of `step_s` that sleeps."""
    return LoopRun(
        label="yours", time_to_first_batch_s=wait_s, first_batch_samples=4,
        wait_s=(wait_s,) * batches, step_s=(step_s,) * batches, samples=(4,) * batches,
        ended="epoch", cpu_s=wait_s * (batches + 1), peak_rss_bytes=0, step_cpu_s=0.0,
        fetch_cpu_s=wait_s * (batches + 1),
    )  # fmt: skip


def test_more_workers_are_not_offered_where_the_hand_over_costs_more_than_they_save() -> None:
    facts = dataclasses.replace(FACTS, num_workers=0, batch_size=4, tensors_per_batch=100)
    run = in_process()
    offered = judge(run, facts, usable_cores=4).change
    assert offered is not None and offered.setting == "num_workers"  # loading looks free
    # a batch of 100 tensors taking 40 ms to take over: the loop would run slower than now
    costly = Handover(tensors=100, send_s=0.004, take_s=0.04)
    assert judge(run, facts, usable_cores=4, handover=costly).change is None
    cheap = Handover(tensors=1, send_s=0.0001, take_s=0.0003)
    change = judge(run, facts, usable_cores=4, handover=cheap).change
    assert change is not None and change.predicted_samples_per_s > 1.2 * (400 / 0.7)


def waiting_on_storage(batches: int = 100, wait_s: float = 0.02) -> LoopRun:
    """A loop of batches of 8 that waits `wait_s` for each, its loader's processes idle."""
    return LoopRun(
        label="yours", time_to_first_batch_s=wait_s, first_batch_samples=8,
        wait_s=(wait_s,) * batches, step_s=(0.01,) * batches, samples=(8,) * batches,
        ended="epoch", cpu_s=0.02, peak_rss_bytes=0, step_cpu_s=0.0, fetch_cpu_s=0.005,
    )  # fmt: skip


def test_workers_beyond_the_data_sets_shards_are_not_counted_on() -> None:
    """2 workers on 4 cores waiting on storage: more workers would read more, unless the data
    set has fewer shards than workers, when the others get nothing to read."""
    run = waiting_on_storage()
    spread = dataclasses.replace(FACTS, persistent_workers=True)
    change = judge(run, spread, usable_cores=4).change
    assert change is not None and change.setting == "num_workers" and change.to > 2
    one_shard = dataclasses.replace(spread, shards=1)
    assert judge(run, one_shard, usable_cores=4).change is None
    two = judge(run, dataclasses.replace(spread, num_workers=1, shards=2), usable_cores=4).change
    assert two is not None and two.to == 2  # the second shard's worker, and no more


def test_a_worker_count_is_held_to_the_step_and_the_hand_over_taking_turns() -> None:
    """Batches of 100 tensors: the training thread takes each over between its steps, so no
    count reads faster than one step plus one take-over a batch; where that is slower than
    now, no count is offered."""
    many = dataclasses.replace(FACTS, persistent_workers=True, tensors_per_batch=100)
    run = waiting_on_storage()  # 8 samples a batch, a 10 ms step: 800 samples/s at most
    slow = Handover(tensors=100, send_s=0.002, take_s=0.04)
    assert judge(run, many, usable_cores=4, handover=slow).change is None
    quick = Handover(tensors=100, send_s=0.002, take_s=0.004)
    change = judge(run, many, usable_cores=4, handover=quick).change
    assert change is not None and change.setting == "num_workers"
    assert change.predicted_samples_per_s <= 8 / (0.01 + 0.004) + 1e-9
    assert change.predicted_samples_per_s > change.measured_samples_per_s


def test_a_dip_at_every_epochs_start_is_named_and_not_taken_for_a_slow_loader() -> None:
    """Workers kept, every batch after 0.3 ms but each epoch's first after 100 ms (the
    storage's first byte with nothing in flight): the dip is named, the steady loop leaves
    those batches out, and more workers, which would not remove them, are not offered."""
    dips = restarting(3, stall_s=0.1, wait_s=0.0003, second_s=0.0003)
    run = dataclasses.replace(dips, cpu_s=0.01, step_cpu_s=0.0, fetch_cpu_s=0.001)
    kept = dataclasses.replace(FACTS, persistent_workers=True)
    # the same waits, not known as epochs' starts: a slow loader, more workers offered
    unknown = judge(dataclasses.replace(run, epoch_starts=()), kept, usable_cores=4)
    assert unknown.change is not None and unknown.change.setting == "num_workers"
    report = judge(run, kept, usable_cores=4)
    assert report.verdict is not None and report.verdict.input_bound  # 0.2 s of 0.81 s waits
    dip = next(t.line for t in report.trips if t.cause == "epoch-start")
    assert "its first batch waited 100 ms (median of 2 epochs) where the others wait 300 µs" in dip
    samples_per_s, waiting = steady_rate(run)
    assert samples_per_s == pytest.approx(8 / 0.0103) and waiting == pytest.approx(0.3 / 10.3)
    assert report.change is None
    # without the dips the same loop is steady: nothing to name
    flat = judge(
        restarting(3, stall_s=0.0003, wait_s=0.0003, second_s=0.0003), kept, usable_cores=4
    )
    assert "epoch-start" not in {t.cause for t in flat.trips}


def test_the_machines_other_work_is_the_loops_own_figure() -> None:
    """One figure for other work, the instrument's (`LoopRun.others_cores`): a loader that
    idles while other work keeps the cores busy is not said to wait on storage (waiting on it
    and being starved of CPU read the same), and the change is predicted on the cores it left;
    on a quiet machine the same loop waits on storage."""
    quiet = judge(dataclasses.replace(waiting_on_storage(), others_cores=0.1), FACTS, 4)
    busy = judge(dataclasses.replace(waiting_on_storage(), others_cores=3.9), FACTS, 4)
    unread = judge(waiting_on_storage(), FACTS, 4)
    assert quiet.bottleneck is not None and quiet.bottleneck.stage == "storage"
    assert unread.bottleneck == quiet.bottleneck  # not measured: nothing said of other work
    assert busy.bottleneck is not None and busy.bottleneck.stage == "unexplained"
    # the tree's 0.02 s of CPU over the loop's 3.02 s, and the other work's 3.9 cores, of 4
    assert "cores were 98% busy" in busy.bottleneck.reason
    assert quiet.change is not None and busy.change is not None
    assert "on the 3.9 of 4 cores other work left" in quiet.change.line
    assert "on the 1.0 of 4 cores other work left" in busy.change.line


def test_a_loops_costs_are_what_it_measured_and_its_change_is_the_models_own() -> None:
    """2 workers waiting on storage: each loading process takes 2 / rate s a sample (1 / rate
    where the data set has one shard: only one reads), the training thread's CPU taking
    their batches over (or the timed wait for a ready batch, where longer) is its own, the
    rest of the loader's CPU the workers', and the step, a sleep, holds no core. The change
    offered is what the model predicts from those costs, untouched."""
    run = waiting_on_storage()
    summary = LoopSummary.of(run)
    rate, waits = steady_rate(run)
    assert rate == pytest.approx(8 / 0.03) and waits == pytest.approx(2 / 3)
    loading = loop_costs(run, summary, 2, 2, rate, waits, None)
    assert loading is not None and summary.loader_cpu_s_per_sample is not None
    fetched = 0.005 / run.total_samples
    assert loading.cpu_s_per_sample == pytest.approx(summary.loader_cpu_s_per_sample - fetched)
    costs = loading.costs
    assert costs.main_s == pytest.approx(fetched) and costs.worker_s is None
    assert costs.process_s == pytest.approx(2 / rate) and costs.step_cpu_share == 0.0
    assert costs.epoch_start_s == 0.0  # the steady rate leaves each epoch's start out
    one_shard = loop_costs(run, summary, 2, 1, rate, waits, None)
    assert one_shard is not None and one_shard.costs.process_s == pytest.approx(1 / rate)
    slow = Handover(tensors=1, send_s=0.0004, take_s=0.004)
    taking = loop_costs(run, summary, 2, 2, rate, waits, slow)
    assert taking is not None and taking.costs.main_s == pytest.approx(0.004 / 8)

    spread = dataclasses.replace(FACTS, persistent_workers=True)
    change = judge(run, spread, usable_cores=4).change
    assert change is not None and change.setting == "num_workers"
    model = predict(
        change.to, object_bytes=0.0, cpu_s_per_sample=loading.cpu_s_per_sample,
        usable_cores=4, consumer_rate=step_rate(run), costs=costs,
    )  # fmt: skip
    assert change.predicted_samples_per_s == model.trained_samples_per_s


def test_a_loop_without_workers_prices_a_worker_with_its_hand_over() -> None:
    """0 workers: the training process loads while it waits, so a process's time per sample
    is the waiting share over the rate; a worker would also pickle each batch it makes."""
    run = in_process()
    summary = LoopSummary.of(run)
    rate, waits = steady_rate(run)
    assert rate is not None and waits is not None
    cheap = Handover(tensors=1, send_s=0.0001, take_s=0.0003)
    loading = loop_costs(run, summary, 0, 0, rate, waits, cheap)
    assert loading is not None and summary.loader_cpu_s_per_sample is not None
    assert loading.costs.process_s == pytest.approx(waits / rate)
    assert loading.costs.worker_s == pytest.approx(summary.loader_cpu_s_per_sample + 0.0001 / 4)
    assert loading.costs.main_s == pytest.approx(0.0003 / 4)

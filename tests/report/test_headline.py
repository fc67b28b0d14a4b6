"""The headline's next step: wherever the recommended loader cannot keep up, one action to
reach the consumer's rate, from the stage that limits it; none where it keeps up."""

from __future__ import annotations

import dataclasses
import typing
from types import SimpleNamespace
from typing import Any

import pytest

from advisor.core.units import rate
from advisor.core.workload import Workload
from advisor.decide.bottleneck import Bottleneck, Stage
from advisor.decide.recommend import Recommendation, recommend
from advisor.measure.trial.probe_results import HandoverCost
from advisor.report.headline import headline_lines, verdict_headline
from advisor.report.next_step import keep_up_action
from tests.builders import hardware, profile

STAGES = typing.get_args(Stage)


def _rec(
    stage: str | None, source: str | None = None, input_bound: bool = True, disk: str = "nvme"
) -> Recommendation:
    """A real recommendation for 300 samples/s, its trial's bottleneck at 120 samples/s, on a
    machine whose local disk is of `disk`'s kind."""
    machine = hardware()
    assert machine.disk is not None
    machine = dataclasses.replace(machine, disk=dataclasses.replace(machine.disk, kind=disk))
    rec = recommend(profile(2000, 150_000, "jpeg", uri="s3://b/images/"), machine,
                    Workload(consumer_rate=300))  # fmt: skip
    limit = None if stage is None else Bottleneck(stage, 120.0, (), "why", "trial")  # type: ignore[arg-type]
    return dataclasses.replace(
        rec, input_bound=input_bound, bottleneck=limit, data_source=source or rec.data_source
    )


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "step"])
def test_a_loader_that_cannot_keep_up_always_gets_one_next_step(stage: str) -> None:
    rec = _rec(stage)
    action = keep_up_action(rec)
    assert action is not None and action.startswith("To keep up"), stage
    assert "\n" not in action
    lines = headline_lines(rec, None, 300.0)
    assert lines[-1] == action  # the headline carries it


@pytest.mark.parametrize(
    ("stage", "source", "words"),
    [
        ("cores", None, "2.5x the cores"),
        ("decode", None, "2.5x cheaper to load"),
        ("handover", None, "hand over less per batch"),
        ("storage", "stream", "python -m advisor reshard"),
        ("storage", "copy-local-ssd", "faster disk"),
        ("storage", "copy-local", "fewer bytes, or stripe the copy over more NVMe disks"),
        ("workers", None, "longer live trial"),
        ("shards", None, "deal the shards evenly: the num_workers that does, or a re-shard"),
        ("unexplained", None, "no measured stage is at its ceiling"),
        (None, None, "run the live trial"),
    ],
)
def test_the_next_step_follows_the_limiting_stage(
    stage: str | None, source: str | None, words: str
) -> None:
    disk = "ssd" if source == "copy-local-ssd" else "nvme"
    rec = _rec(stage, source and source.removesuffix("-ssd"), disk=disk)
    if stage == "shards":  # NW-5 gave what deals them better; without it, see below
        rec = dataclasses.replace(rec, fired_rules=(*rec.fired_rules, "NW-5"))
    action = keep_up_action(rec)
    assert action is not None and words in action, action
    if stage is not None:
        assert "120 samples/s of the 300 samples/s needed" in action


def test_a_shortfall_within_the_noise_says_so_and_no_trial_is_asked_again() -> None:
    """The README's picture: 277 of 300 samples/s after a 30 s trial, the slices on both sides
    of the 285 that keeps up. The action asked for "a longer live trial (30 s or more)"."""
    rec = _rec("unexplained")
    assert rec.bottleneck is not None
    close = dataclasses.replace(rec.bottleneck, within_noise=("285 samples/s (keeping up)",))
    action = keep_up_action(dataclasses.replace(rec, bottleneck=close))
    assert action is not None and "within the noise of keeping up" in action
    assert "trial" not in action and "cheaper to load" in action


def test_a_loader_that_keeps_up_gets_no_action() -> None:
    assert keep_up_action(_rec("step", input_bound=False)) is None
    assert not any(line.startswith("To keep up") for line in headline_lines(
        _rec("step", input_bound=False), None, 300.0))  # fmt: skip


def _measured(consumer: float, slices: tuple[float, float, float]) -> Recommendation:
    """A recommendation from a trial that measured 1 worker's `slices` (low, median, high) on
    JPEGs streamed from S3 to 2 cores, no GPU."""
    from tests.builders import make_hardware, make_profile, make_trial

    low, median, high = slices
    jpeg = make_profile(fmt="jpeg", spo=None, size=150_000, count=50_000)
    trial = make_trial(rates={0: 200.0, 1: slices, 2: (low - 5, median - 3, high - 10)},
                       output_bytes=1.5e6)  # fmt: skip
    return recommend(jpeg, make_hardware(cores=2, gpus=0, disk_free=0),
                     Workload(consumer_rate=consumer), trial)  # fmt: skip


@pytest.mark.parametrize(
    ("consumer", "slices", "tone", "words"),
    [
        (200.0, (245.0, 249.0, 252.0), "keeps-up", "The loader keeps up: 200 of the 200"),
        # 249 against the 275.5 that keeps up, its slices on both sides of it
        (290.0, (230.0, 249.0, 290.0), "within-noise", "short by 14%, within the measured noise"),
        (400.0, (245.0, 249.0, 252.0), "short", "The loader cannot keep up: short by 38%."),
    ],
)
def test_the_headline_is_short_and_its_tone_follows_the_measurement(
    consumer: float, slices: tuple[float, float, float], tone: str, words: str
) -> None:
    from advisor.report.headline import HEADLINE_WORDS, verdict_headline
    from advisor.wizard.panels.recommendation import headline

    rec = _measured(consumer, slices)
    said = verdict_headline(rec)
    assert said is not None and said.tone == tone and words in said.text, said
    assert len(said.text.split()) <= HEADLINE_WORDS == 25
    shown = headline(rec, None, consumer)
    assert f"la-verdict-{tone}" in shown
    # red only outside the noise; the reasoning (the action's why) behind the evidence
    assert ("la-error" in shown) == (tone == "short")
    if tone == "short":  # the one action: what the preprocessing card offers
        assert said.text.endswith("Store the images decoded, once, offline.")
        assert "evidence and notes" in shown and "To keep up (249 samples/s" in shown


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "step"] + [None])
def test_every_short_headline_fits_in_25_words_with_its_one_action(stage: str | None) -> None:
    """Short beyond the noise, from the trial or in the user's loop (its rounds waiting 30-34%,
    beyond the 5% that keeps up): red, one action, 25 words at most; within the noise (a round
    at 4%) not red."""
    from advisor.diagnosis import Comparison
    from advisor.report.headline import verdict_headline

    def run(waits: float) -> Any:
        summary = SimpleNamespace(overall_samples_per_s=200.0, overall_wait_share=waits)
        return SimpleNamespace(summary=summary, verdict=None, bottleneck=None)

    rec = _rec(stage)
    short = Comparison((run(0.8), run(0.8)), (run(0.30), run(0.34)))
    close = Comparison((run(0.8), run(0.8)), (run(0.04), run(0.09)))
    for said in (verdict_headline(rec), verdict_headline(rec, short)):
        assert said is not None and said.tone == "short", said
        assert len(said.text.split()) <= 25, said.text
    within = verdict_headline(rec, close)
    assert within is not None and within.tone == "within-noise", within
    assert "within the measured noise" in within.text and len(within.text.split()) <= 25


def test_a_plan_for_another_machine_names_the_models_limit_not_a_trial_that_ran() -> None:
    """A trial measured 0-2 workers here; the plan is for a 32-core node, whose count the
    trial could not measure: no measured bottleneck there, so the action follows the model's
    limit at its predicted rate. It asked the user to run the live trial, which had run."""
    from tests.builders import make_hardware, make_profile, make_trial

    jpeg = make_profile(fmt="jpeg", spo=None, size=150_000, count=50_000)
    trial = make_trial(rates={0: 200.0, 1: 300.0, 2: 390.0}, output_bytes=1.5e6)
    node = make_hardware(cores=2, gpus=0, target={"cores": 32.0, "gpus": 1})
    rec = recommend(jpeg, node, Workload(consumer_rate=50_000), trial)
    assert rec.input_bound and rec.bottleneck is None and rec.num_workers > 2
    throughput = rec.decision("throughput")
    assert throughput.evidence["sweep_samples_per_s"]  # the trial ran
    limit = throughput.evidence["bottleneck"]
    action = keep_up_action(rec)
    assert action is not None and "live trial" not in action, action
    assert f"{rate(rec.expected_samples_per_s)} predicted of the 50,000 samples/s" in action
    said = verdict_headline(rec)
    assert said is not None and "live trial" not in said.text, (limit, said.text)
    # without a trial, only a trial can tell what limits the loader
    guessed = recommend(jpeg, node, Workload(consumer_rate=50_000))
    assert "run the live trial" in (keep_up_action(guessed) or "")


def test_a_loop_whose_loader_keeps_up_names_the_training_threads_turns() -> None:
    """With workers the training thread takes each batch (130 µs a sample, as the demo's trial
    measured it for batches of differently sized images) and then steps, in turn: at 2,500
    samples/s the loop runs at most 1 / (400 + 130 µs), 1,887 samples/s, however fast 8
    striped NVMe disks and 12 cores a rank load. It said "the limit is CPU time per sample"
    and offered to store the images decoded, which hands over more."""
    from tests.builders import make_hardware, make_profile, make_trial

    jpeg = make_profile(fmt="jpeg", spo=None, size=150_000, count=50_000)
    trial = make_trial(rates={0: 200.0, 1: 300.0, 2: 390.0}, output_bytes=1.5e6)
    taken = HandoverCost(64, 32, 1.5e6, worker_s_per_sample=300e-6, main_s_per_sample=130e-6)
    trial = dataclasses.replace(trial, handover=taken)
    node = {"cores": 96.0, "gpus": 8, "local_disk_bytes": 8 * 10**12, "local_disks": 8}
    machine = make_hardware(cores=2, gpus=0, target=node)
    rec = recommend(jpeg, machine, Workload(consumer_rate=2500, gpus_per_node=8), trial)
    throughput = rec.decision("throughput")
    assert rec.input_bound and throughput.evidence["bottleneck"] == "training", throughput
    assert "the limit is the training thread, which takes each batch" in throughput.rationale
    assert rec.expected_samples_per_s == pytest.approx(1 / (1 / 2500 + 130e-6), rel=0.02)
    action = keep_up_action(rec)
    assert action is not None and "hand over less per batch" in action, action
    said = verdict_headline(rec)
    assert said is not None and "Hand over less per batch" in said.text, said.text


def test_an_epoch_no_dealing_improves_asks_for_more_samples_a_rank() -> None:
    """3 one-sample objects over 2 workers: the epoch's objects limit the loop, and no count or
    re-shard deals 3 samples better than 2 + 1 (NW-5 is silent). The action said "deal the
    shards evenly: see num_workers", where num_workers says nothing of it."""
    from tests.builders import make_ctx

    case = {
        "profile": {"count": 3, "spo": 1, "size": 100_000},
        "hardware": {"cores": 2, "ram_available": 1_100 * 10**6},
        "workload": {"consumer_rate": 5000.0},
        "trial": {},
    }
    ctx = make_ctx(case)
    rec = recommend(ctx.profile, ctx.hardware, ctx.workload, ctx.trial)
    assert rec.input_bound and rec.decision("throughput").evidence["bottleneck"] == "objects"
    assert "NW-5" not in rec.path()
    action = keep_up_action(rec)
    assert action is not None and "give each rank more samples an epoch" in action, action
    assert "deal the shards evenly" not in action
    said = verdict_headline(rec)
    assert said is not None and "Give each rank more samples an epoch" in said.text, said.text


def test_a_copy_on_local_nvme_at_its_bandwidth_is_not_sent_to_local_nvme() -> None:
    """8 ranks of a 96-core node reading 150 KB images from one NVMe disk: its bandwidth is the
    model's limit. The next step said to put the copy on a faster disk (local NVMe)."""
    from tests.builders import make_hardware, make_profile, make_trial

    jpeg = make_profile(fmt="jpeg", spo=None, size=150_000, count=50_000)
    trial = make_trial(rates={0: 200.0, 1: 300.0, 2: 390.0}, output_bytes=1.5e6)
    node = make_hardware(cores=2, gpus=0, target={"cores": 96.0, "gpus": 8})
    rec = recommend(jpeg, node, Workload(consumer_rate=2500, gpus_per_node=8), trial)
    throughput = rec.decision("throughput").evidence
    assert rec.data_source == "copy-local" and throughput["storage"] == "local-nvme"
    assert rec.input_bound and throughput["bottleneck"] == "bandwidth", throughput
    action = keep_up_action(rec)
    assert action is not None and "faster disk" not in action, action
    assert "store each sample in fewer bytes, or stripe the copy over more NVMe" in action

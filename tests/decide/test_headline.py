"""The headline's next step: wherever the recommended loader cannot keep up, one action to
reach the consumer's rate, from the stage that limits it; none where it keeps up."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from advisor.core.workload import Workload
from advisor.decide.recommend import Recommendation, recommend
from advisor.decide.rules.bottleneck import Bottleneck, Stage
from advisor.report.headline import headline_lines, keep_up_action
from tests.builders import hardware, profile

STAGES = typing.get_args(Stage)


def _rec(stage: str | None, source: str | None = None, input_bound: bool = True) -> Recommendation:
    """A real recommendation for 300 samples/s, its trial's bottleneck at 120 samples/s."""
    rec = recommend(profile(2000, 150_000, "jpeg", uri="s3://b/images/"), hardware(),
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
        ("storage", "copy-local", "faster disk"),
        ("workers", None, "longer live trial"),
        ("shards", None, "deal the shards evenly: the num_workers that does, or a re-shard"),
        ("unexplained", None, "no measured stage is at its ceiling"),
        (None, None, "run the live trial"),
    ],
)
def test_the_next_step_follows_the_limiting_stage(
    stage: str | None, source: str | None, words: str
) -> None:
    action = keep_up_action(_rec(stage, source))
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

"""The session's history of runs (`advisor.decide.history`): every trial with its answer and
every comparison kept side by side, and whether a repeated trial's answer held. The comparison
of answers from hand-built records; the session and the wizard on a real local folder with short
trials."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from advisor.core.bounds import LoopLimits
from advisor.core.workload import Workload
from advisor.decide.history import (
    AnswerChange,
    CountFigure,
    History,
    LoopRecord,
    RunStore,
    TrialRecord,
    repeat_of,
)
from advisor.measure.loop.results import Spread
from advisor.report.history import answer_change_words, history_table, repeat_words
from advisor.session import AdvisorSession

QUICK = LoopLimits(max_batches=20, max_seconds=0.5, batch_timeout_s=20, first_batch_timeout_s=30)


def _record(number: int, **fields: object) -> TrialRecord:
    base = TrialRecord(
        number=number, at=0.0, dataset="s3://bucket/data/", consumer_rate=300.0,
        trial_seconds=10.0, seconds_used=9.5,
        counts=(CountFigure(0, 74.0, 70.0, 78.0), CountFigure(2, 270.0, 260.0, 280.0)),
        num_workers=2, data_source="stream", bottleneck="storage", confidence="high",
    )  # fmt: skip
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def test_the_same_answer_within_the_spread_held() -> None:
    repeat = repeat_of(_record(1), _record(2, counts=(CountFigure(2, 276.0, 265.0, 290.0),)))
    assert repeat.held and repeat.answered and repeat.moved == ()
    assert repeat_words(repeat) == (
        "#2 repeats #1: the answer held (the same num_workers, data source and bottleneck); "
        "the rates were within the measured spread"
    )


def test_a_changed_answer_names_what_changed_and_the_rates_that_moved() -> None:
    later = _record(
        3, num_workers=3, bottleneck="decode or transform",
        counts=(CountFigure(0, 75.0, 71.0, 77.0), CountFigure(2, 200.0, 190.0, 210.0)),
    )  # fmt: skip
    repeat = repeat_of(_record(1), later)
    assert not repeat.held
    assert repeat.changes == (
        AnswerChange("num_workers", 2, 3),
        AnswerChange("bottleneck", "storage", "decode or transform"),
    )
    # count 0 overlapped (70-78 and 71-77); count 2 did not (260-280, then 190-210)
    assert repeat.moved == ((CountFigure(2, 270.0, 260.0, 280.0), later.counts[1]),)
    assert (
        "the answer changed: num workers 2 -> 3; bottleneck storage -> decode or transform; "
        "rates differed beyond the measured spread at num_workers=2: 270 -> 200 samples/s "
        "(slices 260-280, then 190-210)"
    ) in repeat_words(repeat)


def test_a_bottleneck_named_within_the_noise_says_so_when_a_repeat_names_another() -> None:
    earlier = _record(1, bottleneck="the training step (not input-bound)",
                      bottleneck_within_noise=True)  # fmt: skip
    repeat = repeat_of(earlier, _record(2, bottleneck="no measured stage"))
    assert [answer_change_words(c) for c in repeat.changes] == [
        "bottleneck the training step (not input-bound) -> no measured stage (within the noise, "
        "as the trial said)",
    ]
    firm = repeat_of(_record(1), _record(2, bottleneck="cores")).changes
    assert [answer_change_words(c) for c in firm] == ["bottleneck storage -> cores"]


def test_without_a_recommendation_only_the_rates_compare() -> None:
    repeat = repeat_of(_record(1, num_workers=None), _record(2))
    assert not repeat.answered and not repeat.held
    assert "no recommendation was made from both runs" in repeat_words(repeat)


def test_repeats_pair_the_same_inputs_and_skip_cancelled_trials() -> None:
    history = History(
        (
            _record(1),
            _record(2, consumer_rate=600.0),  # other inputs: no repeat of #1
            _record(3, cancelled=True),  # partial: compared with nothing
            _record(4),
            _record(5, trial_seconds=20.0),
            _record(6),
        )
    )
    assert [(r.earlier, r.later) for r in history.repeats()] == [(1, 4), (4, 6)]
    text = history_table(history)
    assert "#3" in text and "cancelled" in text
    assert "#4 repeats #1: the answer held" in text and "#6 repeats #4" in text
    assert history_table(History()) == "no trial or comparison has run in this session yet"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(200):
        (data / f"s{i:04d}.bin").write_bytes(random.Random(i).randbytes(20_000))
    return data


def test_the_session_keeps_each_trial_with_its_answer(folder: Path) -> None:
    """Two short trials of the same inputs and one of another consumer rate, each with its
    recommendation: three records side by side, one repeat, the answer's facts as made."""
    session = AdvisorSession()
    session.set_location(str(folder))
    session.set_workload(Workload(consumer_rate=300, batch_size=16))
    answers = []
    for _ in range(2):
        session.run_trial(2)
        answers.append(session.run_recommend())
    session.set_workload(Workload(consumer_rate=5000, batch_size=16))
    session.run_trial(2)  # no recommendation made from this one
    history = session.history()
    assert [t.number for t in history.trials] == [1, 2, 3]
    first, _, last = history.trials
    assert first.dataset == str(folder) and first.consumer_rate == 300
    assert first.trial_seconds == 2 and first.result is not None
    assert {c.num_workers for c in first.counts} == {c.num_workers for c in first.result.counts}
    assert first.num_workers == answers[0].num_workers
    assert first.data_source == "the folder, read in place"
    assert first.bottleneck == (answers[0].bottleneck.words if answers[0].bottleneck else None)
    assert first.confidence == answers[0].decision("num_workers").confidence
    assert last.consumer_rate == 5000 and last.num_workers is None
    (repeat,) = history.repeats()
    assert (repeat.earlier, repeat.later) == (1, 2) and repeat.answered
    assert repeat.held == (answers[0].num_workers == answers[1].num_workers and not repeat.changes)
    text = history_table(history)
    assert "#2 repeats #1: the answer " in text and "5,000 samples/s" in text
    # records are frozen: the history cannot be changed from outside
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.num_workers = 9  # type: ignore[misc]


def user_loader() -> Iterator[list[bytes]]:
    """The user's loader for the wizard test: batches of 16 that take 10 ms each to load."""
    for _ in range(10_000):
        time.sleep(0.01)
        yield [bytes(20_000)] * 16


def test_the_wizard_shows_trials_repeats_and_a_comparison(folder: Path) -> None:
    """The wizard on a real folder: a trial, its recommendation, the trial again, and the
    user's loader against the recommended one: the recommendation step's history shows them."""
    from advisor.wizard.controller import WizardController
    from advisor.wizard.views import Wizard

    wizard = Wizard(WizardController(AdvisorSession(), uri=str(folder)))
    c = wizard.controller
    try:
        assert c.run_profile() and c.wait(30) and c.profile is not None, c.errors
        assert c.next() and c.wait(30)  # the hardware probe
        assert c.next()
        c.workload_step.form.samples_per_s, c.workload_step.form.batch_size = "300", "16"
        assert c.next(), c.workload_step.field_errors  # the trial step
        for _ in range(2):
            assert c.run_trial(2) and c.wait(30) and c.trial is not None, c.errors
            assert c.next() and c.recommendation is not None, c.errors
            assert c.back()
        assert c.next()
        box = wizard.recommendation_panel.history.box.value
        assert "History: 2 runs in this session; #2 repeats #1: the answer" in box
        assert "la-history-trials" in box and "the folder, read in place" in box
        c.workload_step.form.loader = "tests.decide.test_run_history:user_loader"
        assert c.recommendation_step.diagnose_user_loader(limits=QUICK, rounds=1)
        assert c.wait(60) and not c.recommendation_step.failed, c.errors
        (compared,) = c.session.history().comparisons
        assert compared.number == 3 and compared.dataset == str(folder)
        assert compared.before is not None and compared.after is not None
        assert compared.ratio is not None and compared.ratio.n == 1
        box = wizard.recommendation_panel.history.box.value
        assert "History: 3 runs" in box and "la-history-comparisons" in box
    finally:
        wizard.close()


def test_the_magic_lists_the_runs_kept_filters_and_compares_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], folder: Path
) -> None:
    """`%advisor history` lists what the run history holds (an earlier kernel's runs too):
    here two trials of a session gone, of the folder, and a watched epoch of another data
    set; where the history cannot be read, the error and the shown wizard's own runs."""
    from advisor import magic

    monkeypatch.setattr(magic, "_shown", [])
    magic.advisor_magic("history")
    assert "no run kept yet" in capsys.readouterr().out
    earlier = AdvisorSession()
    earlier.set_location(str(folder))
    earlier.set_workload(Workload(consumer_rate=300, batch_size=16))
    for _ in range(2):
        earlier.run_trial(2)
        earlier.run_recommend()
    RunStore().add(
        LoopRecord(0, time.time(), "watch", "ImageFolder", "your loader", 1, 60, 250.0, 0.3,
                   Spread(250, 240, 260, 3), Spread(0.3, 0.25, 0.35, 3), "keeps up")
    )  # fmt: skip
    del earlier  # the session (a kernel) ends; its runs stay
    magic.advisor_magic("history")
    out = capsys.readouterr().out
    assert "the last 3 runs" in out and "#2 repeats #1: the answer " in out
    assert "watch: your loader, through epoch 1" in out and "250 (240-260)" in out
    magic.advisor_magic("history --dataset ImageFolder")
    out = capsys.readouterr().out
    assert "the last 1 runs of ImageFolder" in out and str(folder) not in out
    magic.advisor_magic("history --compare 1 2")
    out = capsys.readouterr().out
    assert out.startswith("#1 (trial, ") and "  num_workers=0: " in out
    magic.advisor_magic("history --compare 1 3")
    assert "error: run #1 is a trial and #3 a loop" in capsys.readouterr().out
    magic.advisor_magic("--help")
    assert "%advisor history" in capsys.readouterr().out

    RunStore().path.write_bytes(b"garbage" * 100)  # unreadable: the wizard's session instead
    session = AdvisorSession()
    magic._shown[:] = [SimpleNamespace(controller=SimpleNamespace(session=session))]
    magic.advisor_magic("history")
    out = capsys.readouterr().out
    assert "error: the run history " in out and "cache --remove history" in out
    assert out.rstrip().endswith("no trial or comparison has run in this session yet")


def test_each_watched_epoch_is_kept_unless_asked_not_to() -> None:
    """At each epoch's end the loop as `watch` reported it then; none with history=False."""
    import advisor

    batches = [[bytes(100)] * 4 for _ in range(30)]
    watched = advisor.watch(batches, out=None, min_steps=5)
    for _ in range(2):
        for _batch in watched:
            time.sleep(0.001)
    loops = RunStore().load().loops
    assert [(r.kind, r.epoch, r.steps, r.dataset) for r in loops] == [
        ("watch", 1, 30, "list"), ("watch", 2, 60, "list"),  # the loop so far, as reported
    ]  # fmt: skip
    report = watched.reports[-1].summary
    assert loops[1].samples_per_s == report.overall_samples_per_s
    assert loops[1].windows_wait_share == report.wait_share
    for _batch in advisor.watch(batches, out=None, history=False):
        pass
    assert len(RunStore().load()) == 2


def test_the_panel_filters_by_data_set_and_compares_two_runs(folder: Path) -> None:
    """The History panel: runs of two data sets kept by earlier sessions; it opens on this
    session's data set, lists every data set on asking, and compares the two runs picked."""
    from advisor.wizard.panels.history import HistoryPanel

    store = RunStore()
    for median in (250.0, 400.0):
        store.add(
            LoopRecord(0, time.time(), "watch", "ImageFolder", "your loader", 1, 60, median,
                       0.3, Spread(median, median - 10, median + 10, 3), None, "keeps up")
        )  # fmt: skip
    session = AdvisorSession()
    session.set_location(str(folder))
    session.set_workload(Workload(consumer_rate=300, batch_size=16))
    session.run_trial(2)
    panel = HistoryPanel(session)
    panel.show()
    assert panel.dataset.value == str(folder)
    assert "History: 1 run in this session" in panel.box.value
    assert "la-history-trials" in panel.box.value and "la-history-loops" not in panel.box.value
    panel.dataset.value = ""  # every data set
    assert "History: 1 run in this session, 2 from earlier ones" in panel.box.value
    assert "la-history-loops" in panel.box.value
    panel.first.value, panel.second.value = 1, 2
    compared = panel.compared.value
    assert compared.startswith("#1 (watch through epoch 1, ")
    assert (
        "samples/s per window: 250 (240-260) samples/s against 400 (390-410) samples/s: "
        "apart beyond the measured spread" in compared
    )
    panel.second.value = 3
    assert "run #1 is a loop and #3 a trial" in panel.compared.value

"""The runs side by side (`advisor.decide.history`), as people read them: one row per trial,
per comparison and per judged loop, the header first (the wizard's tables and the text's),
whether a repeated trial's answer held, the whole history as text (`python -m advisor history`,
`%advisor history`), and two runs' figures side by side with their spreads."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from advisor.core.units import duration, per_s, rate, share
from advisor.decide.history.records import (
    FigurePair,
    LoopRecord,
    Run,
    TrialRecord,
    compare_runs,
    kind_of,
    repeat_of,
)
from advisor.report.rows import text_columns

if TYPE_CHECKING:
    from advisor.decide.history import AnswerChange, CountFigure, History, Repeat
    from advisor.measure.loop.results import Spread

TRIAL_HEADER = ("run", "time", "data set", "consumer", "trial", "measured", "num_workers",
                "data source", "bottleneck", "confidence")  # fmt: skip
COMPARISON_HEADER = ("run", "time", "data set", "consumer", "change", "before", "after",
                     "ratio")  # fmt: skip
LOOP_HEADER = ("run", "time", "data set", "what", "steps", "samples/s", "waiting", "verdict")
IN_SESSION = "no trial or comparison has run in this session yet"


def repeat_words(repeat: Repeat) -> str:
    """One line: "#3 repeats #1: the answer held (num_workers 2, ...); rates within ..."."""
    if not repeat.answered:
        answer = "no recommendation was made from both runs, so only the rates compare"
    elif repeat.held:
        answer = "the answer held (the same num_workers, data source and bottleneck)"
    else:
        answer = f"the answer changed: {_changes(repeat)}"
    moved = "; ".join(_moved(was, now) for was, now in repeat.moved)
    rates = (
        f"rates differed beyond the measured spread at {moved}"
        if repeat.moved
        else "the rates were within the measured spread"
    )
    return f"#{repeat.later} repeats #{repeat.earlier}: {answer}; {rates}"


def answer_change_words(change: AnswerChange) -> str:
    """ "num workers 1 -> 2", "bottleneck storage -> cores (within the noise, as the trial
    said)"."""
    words = f"{change.name.replace('_', ' ')} {change.was or 'none'} -> {change.now or 'none'}"
    return words + (" (within the noise, as the trial said)" if change.within_noise else "")


def _changes(repeat: Repeat) -> str:
    return "; ".join(answer_change_words(change) for change in repeat.changes)


def _moved(was: CountFigure, now: CountFigure) -> str:
    """ "num_workers=2: 410 -> 290 samples/s (slices 380-440, then 270-300)"."""
    return (
        f"num_workers={now.num_workers}: {per_s(was.median)} -> {rate(now.median)} "
        f"(slices {per_s(was.low)}-{per_s(was.high)}, then {per_s(now.low)}-{per_s(now.high)})"
    )


def history_trial_rows(history: History) -> list[tuple[str, ...]]:
    """One row per trial, in words, the header first (the wizard's table and the text's)."""
    rows: list[tuple[str, ...]] = [TRIAL_HEADER]
    for t in history.trials:
        measured = ", ".join(
            f"{c.num_workers}: {'>=' if c.lower_bound else ''}{per_s(c.median)} "
            f"({per_s(c.low)}-{per_s(c.high)})"
            for c in t.counts
        )
        used = f"{duration(t.seconds_used)} of {duration(t.trial_seconds)}"
        rows.append((
            f"#{t.number}", _clock(t.at), t.dataset, _consumer(t.consumer_rate),
            used + (", cancelled" if t.cancelled else ""), measured or "-",
            "-" if t.num_workers is None else str(t.num_workers), t.data_source or "-",
            _short(t.bottleneck), t.confidence or "-",
        ))  # fmt: skip
    return rows


def history_comparison_rows(history: History) -> list[tuple[str, ...]]:
    """One row per comparison, the header first."""
    rows: list[tuple[str, ...]] = [COMPARISON_HEADER]
    for c in history.comparisons:
        ratio = "-"
        if c.ratio is not None:
            ratio = f"{c.ratio.median:.2f}x"
            if c.ratio.n > 1:
                ratio += f" ({c.ratio.low:.2f}-{c.ratio.high:.2f}x)"
        rows.append((
            f"#{c.number}", _clock(c.at), c.dataset, _consumer(c.consumer_rate),
            c.change or "-", _spread(c.before), _spread(c.after), ratio,
        ))  # fmt: skip
    return rows


def history_loop_rows(history: History) -> list[tuple[str, ...]]:
    """One row per judged loop (a watched epoch, a diagnose run), the header first."""
    rows: list[tuple[str, ...]] = [LOOP_HEADER]
    for loop in history.loops:
        what = f"{loop.label}, through epoch {loop.epoch}" if loop.epoch is not None else loop.label
        rows.append((
            f"#{loop.number}", _clock(loop.at), loop.dataset, f"{loop.kind}: {what}",
            str(loop.steps), _spread(loop.windows_samples_per_s),
            _share(loop.windows_wait_share), _short(loop.verdict),
        ))  # fmt: skip
    return rows


def history_table(history: History, empty: str = IN_SESSION) -> str:
    """The history as text: the trials side by side, whether repeats held, the comparisons,
    the judged loops; `empty` where there is none."""
    if not history:
        return empty
    parts = []
    if history.trials:
        parts.append("trials (measured: num_workers: median samples/s (slices' spread))")
        parts.append(text_columns(history_trial_rows(history)))
        parts += [repeat_words(repeat) for repeat in history.repeats()]
    if history.comparisons:
        parts.append("your loader against the recommended one (samples/s over the rounds)")
        parts.append(text_columns(history_comparison_rows(history)))
    if history.loops:
        parts.append("loops judged (samples/s and waiting share per window: median (range))")
        parts.append(text_columns(history_loop_rows(history)))
    return "\n".join(parts)


def compare_lines(first: Run, second: Run) -> list[str]:
    """Two runs of a kind side by side: each figure's median (range) in both, and whether
    the ranges part (a difference beyond what was measured). Raises ValueError for two runs of
    different kinds."""
    pairs = compare_runs(first, second)
    lines = [f"#{first.number} ({_about(first)}) against #{second.number} ({_about(second)}):"]
    if isinstance(first, TrialRecord) and isinstance(second, TrialRecord):
        repeat = repeat_of(first, second)
        if not repeat.answered:
            lines.append("  the answer: not made from both trials")
        else:
            lines.append(f"  the answer: {_changes(repeat) or 'the same'}")
    for pair in pairs:
        verdict = "apart beyond the measured spread" if pair.apart else "within the spread"
        if pair.first is None or pair.second is None:
            verdict = "measured in one run only"
        was = (">=" if pair.first_at_least else "") + _figure(pair, pair.first)
        now = (">=" if pair.second_at_least else "") + _figure(pair, pair.second)
        lines.append(f"  {pair.name}: {was} against {now}: {verdict}")
    return lines


def _about(run: Run) -> str:
    what = kind_of(run)
    if isinstance(run, LoopRecord):
        what = run.kind + (f" through epoch {run.epoch}" if run.epoch is not None else "")
    return f"{what}, {_clock(run.at)}, {run.dataset}"


def _figure(pair: FigurePair, spread: Spread | None) -> str:
    if pair.unit == "share":
        return _share(spread)
    if pair.unit == "x":
        return "-" if spread is None else spread.show("{:.2f}x")
    return _spread(spread) + (" samples/s" if spread is not None else "")


def _clock(at: float) -> str:
    """The day and the minute: a history spans sessions and days."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _consumer(consumer_rate: float | None) -> str:
    return rate(consumer_rate) if consumer_rate is not None else "none given"


def _short(bottleneck: str | None) -> str:
    """A bottleneck's words without their gloss: "the training step (not input-bound)" ->
    "the training step"."""
    return bottleneck.split(" (")[0] if bottleneck else "-"


def _spread(spread: Spread | None) -> str:
    if spread is None:
        return "-"
    if spread.n > 1 and per_s(spread.low) != per_s(spread.high):
        return f"{per_s(spread.median)} ({per_s(spread.low)}-{per_s(spread.high)})"
    return per_s(spread.median)


def _share(spread: Spread | None) -> str:
    if spread is None:
        return "-"
    if spread.n > 1 and share(spread.low) != share(spread.high):
        return f"{share(spread.median)} ({share(spread.low)}-{share(spread.high)})"
    return share(spread.median)

"""The session's runs side by side (`advisor.diagnosis.history`), as people read them: one row
per trial and per comparison, the header first (the wizard's tables and the text's), whether a
repeated trial's answer held, and the whole history as text (`%advisor history`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.core.units import duration, per_s, rate

if TYPE_CHECKING:
    from advisor.diagnosis.history import History, Repeat
    from advisor.measure.loop.results import Spread

TRIAL_HEADER = ("run", "time", "data set", "consumer", "trial", "measured", "num_workers",
                "data source", "bottleneck", "confidence")  # fmt: skip
COMPARISON_HEADER = ("run", "time", "data set", "consumer", "change", "before", "after",
                     "ratio")  # fmt: skip


def repeat_words(repeat: Repeat) -> str:
    """One line: "#3 repeats #1: the answer held (num_workers 2, ...); rates within ..."."""
    if not repeat.answered:
        answer = "no recommendation was made from both runs, so only the rates compare"
    elif repeat.held:
        answer = "the answer held (the same num_workers, data source and bottleneck)"
    else:
        answer = f"the answer changed: {'; '.join(repeat.changes)}"
    rates = (
        f"rates differed beyond the measured spread at {'; '.join(repeat.moved)}"
        if repeat.moved
        else "the rates were within the measured spread"
    )
    return f"#{repeat.later} repeats #{repeat.earlier}: {answer}; {rates}"


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


def history_table(history: History) -> str:
    """The history as text: the trials side by side, whether repeats held, the comparisons."""
    if not history:
        return "no trial or comparison has run in this session yet"
    parts = []
    if history.trials:
        parts.append("trials (measured: num_workers: median samples/s (slices' spread))")
        parts.append(_columns(history_trial_rows(history)))
        parts += [repeat_words(repeat) for repeat in history.repeats()]
    if history.comparisons:
        parts.append("your loader against the recommended one (samples/s over the rounds)")
        parts.append(_columns(history_comparison_rows(history)))
    return "\n".join(parts)


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _consumer(consumer_rate: float | None) -> str:
    return rate(consumer_rate) if consumer_rate is not None else "none given"


def _short(bottleneck: str | None) -> str:
    """A bottleneck's words without their gloss: "the training step (not input-bound)" ->
    "the training step"."""
    return bottleneck.split(" (")[0] if bottleneck else "-"


def _spread(spread: Spread | None) -> str:
    if spread is None:
        return "-"
    if spread.n > 1:
        return f"{per_s(spread.median)} ({per_s(spread.low)}-{per_s(spread.high)})"
    return per_s(spread.median)


def _columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as left-aligned text columns, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )

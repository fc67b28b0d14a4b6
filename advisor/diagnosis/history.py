"""The runs of one advisor session, kept side by side: every finished trial with the key facts of
the recommendation made from it, and every before/after comparison.

The session (`AdvisorSession.history()`) keeps them in memory for its life, as frozen records;
nothing is written to disk and no record holds a credential. Where the same inputs (data set,
consumer rate, trial budget and the rest of the trial's setup) were trialled more than once,
`History.repeats()` says whether the answer held: the same num_workers, data source and
bottleneck, and rates within the measured spread, or what changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from advisor.core.units import duration, per_s, rate
from advisor.measure.loop.results import Spread
from advisor.measure.trial.results import TrialResult, TrialSetup

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation
    from advisor.diagnosis.loop import Comparison

__all__ = ["ComparisonRecord", "CountFigure", "History", "Repeat", "TrialRecord", "repeat_of"]


@dataclass(frozen=True)
class CountFigure:
    """One num_workers as the trial measured it: the median samples/s training saw over its
    slices and their spread (`low`-`high`); `lower_bound`: no steady state, at least this."""

    num_workers: int
    median: float
    low: float
    high: float
    lower_bound: bool = False

    def overlaps(self, other: CountFigure) -> bool:
        """True when the two spreads share a value: the difference is within what was measured."""
        return self.low <= other.high and other.low <= self.high


@dataclass(frozen=True)
class TrialRecord:
    """A finished trial (cancelled ones too, marked) and, once one was made from it, the key
    facts of its recommendation (None before)."""

    number: int  # the run's number in the session, shared with comparisons
    at: float  # when it finished, seconds since the epoch
    dataset: str
    consumer_rate: float | None
    trial_seconds: float  # the budget asked for
    seconds_used: float
    counts: tuple[CountFigure, ...]
    cancelled: bool = False
    setup: TrialSetup | None = None
    num_workers: int | None = None
    data_source: str | None = None
    bottleneck: str | None = None
    # the bottleneck's measured slices lay on both sides of a line that names it
    bottleneck_within_noise: bool = False
    confidence: str | None = None
    result: TrialResult | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, number: int, trial: TrialResult, consumer_rate: float | None) -> TrialRecord:
        counts = tuple(
            CountFigure(c.num_workers, c.median, c.low, c.high, c.lower_bound) for c in trial.counts
        )
        return cls(
            number=number, at=time.time(), dataset=trial.uri, consumer_rate=consumer_rate,
            trial_seconds=trial.seconds_budget, seconds_used=trial.seconds_used, counts=counts,
            cancelled=trial.cancelled, setup=trial.setup, result=trial,
        )  # fmt: skip

    def answered(self, rec: Recommendation) -> TrialRecord:
        """This record with the key facts of `rec`, the recommendation made from its trial."""
        try:
            confidence: str | None = str(rec.decision("num_workers").confidence)
        except KeyError:
            confidence = None
        found = rec.bottleneck
        return replace(
            self, num_workers=rec.num_workers, data_source=rec.source_words(),
            bottleneck=found.words if found is not None else None,
            bottleneck_within_noise=found is not None and bool(found.within_noise),
            confidence=confidence,
        )  # fmt: skip

    @property
    def inputs(self) -> tuple[Any, ...]:
        """What makes two trials repeats of each other: the data set, the budget and the setup
        the sweep ran with (the consumer rate, batch size, transform and cores among it)."""
        return (self.dataset, self.consumer_rate, self.trial_seconds, self.setup)

    def count(self, num_workers: int) -> CountFigure | None:
        return next((c for c in self.counts if c.num_workers == num_workers), None)


@dataclass(frozen=True)
class ComparisonRecord:
    """The user's loader against the recommended one through the same step: samples/s of each
    over the rounds, and the ratio after / before."""

    number: int
    at: float
    dataset: str
    consumer_rate: float | None
    change: str  # what the recommendation changed, in words ("" when not known)
    before: Spread | None
    after: Spread | None
    ratio: Spread | None

    @classmethod
    def of(
        cls, number: int, comparison: Comparison, dataset: str, consumer_rate: float | None,
        changed: Sequence[str] = (),
    ) -> ComparisonRecord:  # fmt: skip
        return cls(
            number=number, at=time.time(), dataset=dataset, consumer_rate=consumer_rate,
            change="; ".join(changed),
            before=comparison.pooled("before", "overall_samples_per_s"),
            after=comparison.pooled("after", "overall_samples_per_s"),
            ratio=comparison.speedup,
        )  # fmt: skip


@dataclass(frozen=True)
class Repeat:
    """A trial run again with the same inputs (`later`), against the run before it (`earlier`):
    what of the answer changed, and which counts' rates moved beyond their measured spreads."""

    earlier: int
    later: int
    changes: tuple[str, ...]  # "num_workers 1 -> 2", "bottleneck storage -> decode or transform"
    moved: tuple[str, ...]  # "num_workers=2: 410 -> 290 samples/s (slices 380-440, 270-300)"
    answered: bool  # both runs have a recommendation to compare

    @property
    def held(self) -> bool:
        """The same answer (num_workers, data source, bottleneck) both times."""
        return self.answered and not self.changes

    def words(self) -> str:
        """One line: "#3 repeats #1: the answer held (num_workers 2, ...); rates within ..."."""
        if not self.answered:
            answer = "no recommendation was made from both runs, so only the rates compare"
        elif self.held:
            answer = "the answer held (the same num_workers, data source and bottleneck)"
        else:
            answer = f"the answer changed: {'; '.join(self.changes)}"
        rates = (
            f"rates differed beyond the measured spread at {'; '.join(self.moved)}"
            if self.moved
            else "the rates were within the measured spread"
        )
        return f"#{self.later} repeats #{self.earlier}: {answer}; {rates}"


def repeat_of(earlier: TrialRecord, later: TrialRecord) -> Repeat:
    """Did the answer hold from `earlier` to `later` (two trials of the same inputs)?"""
    answered = earlier.num_workers is not None and later.num_workers is not None
    changes = []
    if answered:
        for name in ("num_workers", "data_source", "bottleneck"):
            was, now = getattr(earlier, name), getattr(later, name)
            if was != now:
                change = f"{name.replace('_', ' ')} {was or 'none'} -> {now or 'none'}"
                if name == "bottleneck" and (
                    earlier.bottleneck_within_noise or later.bottleneck_within_noise
                ):
                    change += " (within the noise, as the trial said)"
                changes.append(change)
    moved = []
    for now in later.counts:
        was = earlier.count(now.num_workers)
        if was is not None and not was.overlaps(now):
            moved.append(
                f"num_workers={now.num_workers}: {per_s(was.median)} -> {rate(now.median)} "
                f"(slices {per_s(was.low)}-{per_s(was.high)}, then "
                f"{per_s(now.low)}-{per_s(now.high)})"
            )
    return Repeat(earlier.number, later.number, tuple(changes), tuple(moved), answered)


@dataclass(frozen=True)
class History:
    """The session's trials and comparisons, oldest first."""

    trials: tuple[TrialRecord, ...] = ()
    comparisons: tuple[ComparisonRecord, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.trials or self.comparisons)

    def repeats(self) -> tuple[Repeat, ...]:
        """Each finished (not cancelled) trial whose inputs an earlier one had, against the
        latest such earlier one."""
        out: list[Repeat] = []
        last: dict[tuple[Any, ...], TrialRecord] = {}
        for record in self.trials:
            if record.cancelled:
                continue
            earlier = last.get(record.inputs)
            if earlier is not None:
                out.append(repeat_of(earlier, record))
            last[record.inputs] = record
        return tuple(out)

    def trial_rows(self) -> list[tuple[str, ...]]:
        """One row per trial, in words, the header first (the wizard's table and the text's)."""
        rows: list[tuple[str, ...]] = [TRIAL_HEADER]
        for t in self.trials:
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

    def comparison_rows(self) -> list[tuple[str, ...]]:
        """One row per comparison, the header first."""
        rows: list[tuple[str, ...]] = [COMPARISON_HEADER]
        for c in self.comparisons:
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

    def table(self) -> str:
        """The history as text: the trials side by side, whether repeats held, the comparisons."""
        if not self:
            return "no trial or comparison has run in this session yet"
        parts = []
        if self.trials:
            parts.append("trials (measured: num_workers: median samples/s (slices' spread))")
            parts.append(_columns(self.trial_rows()))
            parts += [repeat.words() for repeat in self.repeats()]
        if self.comparisons:
            parts.append("your loader against the recommended one (samples/s over the rounds)")
            parts.append(_columns(self.comparison_rows()))
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.table()


TRIAL_HEADER = ("run", "time", "data set", "consumer", "trial", "measured", "num_workers",
                "data source", "bottleneck", "confidence")  # fmt: skip
COMPARISON_HEADER = ("run", "time", "data set", "consumer", "change", "before", "after",
                     "ratio")  # fmt: skip


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

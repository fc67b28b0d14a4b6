"""The runs of one advisor session, kept side by side: every finished trial with the key facts of
the recommendation made from it, and every before/after comparison.

The session (`AdvisorSession.history()`) keeps them in memory for its life, as frozen records;
nothing is written to disk and no record holds a credential. Where the same inputs (data set,
consumer rate, trial budget and the rest of the trial's setup) were trialled more than once,
`History.repeats()` says whether the answer held: the same num_workers, data source and
bottleneck, and rates within the measured spread, or what changed. People read them through
`advisor.report.history`: a row per run, a line per repeat, the whole history as text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from advisor.core.units import per_s, rate
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

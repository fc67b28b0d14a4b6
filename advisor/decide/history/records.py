"""What the run history keeps: a frozen record per finished trial (with the key facts of the
recommendation made from it), per before/after comparison of the user's loader with the advised
one, and per judged loop (an epoch `advisor.watch` saw, a `diagnose` run); and what two of them
say side by side.

No record holds a credential: data set URIs, endpoint-free words and measured figures only.
`History.repeats()` says, where the same inputs (data set, consumer rate, trial budget and the
rest of the trial's setup) were trialled more than once, whether the answer held: the same
num_workers, data source and bottleneck, and rates within the measured spread, or what changed.
`compare_runs` puts two runs' figures side by side with their spreads. The records are kept
across processes by `advisor.decide.history.store`; people read them through
`advisor.report.history`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from advisor.measure.loop.results import Spread
from advisor.measure.trial.results import TrialResult, TrialSetup

if TYPE_CHECKING:
    from advisor.decide.judge import JudgedLoop
    from advisor.decide.judged import Comparison, Diagnosis
    from advisor.decide.recommend import Recommendation

__all__ = [
    "AnswerChange", "ComparisonRecord", "CountFigure", "FigurePair", "History", "LoopRecord",
    "Repeat", "Run", "TrialRecord", "compare_runs", "record_from_dict", "record_to_dict",
    "repeat_of",
]  # fmt: skip


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

    number: int  # the run's number in the history, shared by every kind of run
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
class AnswerChange:
    """One part of the answer (`name`: "num_workers", "data_source" or "bottleneck") that
    differs between two trials of the same inputs; `within_noise`: a bottleneck the trial named
    within the noise (either run's), where another stage may be named the next time."""

    name: str
    was: Any
    now: Any
    within_noise: bool = False


@dataclass(frozen=True)
class Repeat:
    """A trial run again with the same inputs (`later`), against the run before it (`earlier`):
    what of the answer changed, and which counts' rates moved beyond their measured spreads
    (each as the earlier count and the later one). Its words are `advisor.report.history`'s."""

    earlier: int
    later: int
    changes: tuple[AnswerChange, ...]
    moved: tuple[tuple[CountFigure, CountFigure], ...]
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
        noisy = earlier.bottleneck_within_noise or later.bottleneck_within_noise
        for name in ("num_workers", "data_source", "bottleneck"):
            was, now = getattr(earlier, name), getattr(later, name)
            if was != now:
                changes.append(AnswerChange(name, was, now, name == "bottleneck" and noisy))
    moved = []
    for now in later.counts:
        was = earlier.count(now.num_workers)
        if was is not None and not was.overlaps(now):
            moved.append((was, now))
    return Repeat(earlier.number, later.number, tuple(changes), tuple(moved), answered)


@dataclass(frozen=True)
class LoopRecord:
    """A loop judged: the user's training loop under `advisor.watch` at the end of an epoch
    (`kind` "watch", `epoch` from 1), judged as `advisor.watch` reported it then: over the
    steps since the loop began (or since the advised loader was swapped in); or the user's
    loader in the advisor's loop (`kind` "diagnose"). samples/s and the waiting share per
    window (median, lowest-highest) and over the loop."""

    number: int
    at: float
    kind: str
    dataset: str  # what the loader reads, as its settings name it (a data set's class)
    label: str
    epoch: int | None
    steps: int
    samples_per_s: float | None  # over the whole loop after the first batch
    wait_share: float | None
    windows_samples_per_s: Spread | None
    windows_wait_share: Spread | None
    verdict: str | None  # the verdict's line
    change: str | None = None  # the change advised, in words
    proof: str | None = None  # where an advised loader was swapped in: predicted vs measured

    @classmethod
    def of_watch(cls, report: JudgedLoop, epoch: int, label: str) -> LoopRecord:
        s = report.summary
        return cls(
            number=0, at=time.time(), kind="watch",
            dataset=report.facts.dataset if report.facts is not None else "-", label=label,
            epoch=epoch, steps=s.batches, samples_per_s=s.overall_samples_per_s,
            wait_share=s.overall_wait_share, windows_samples_per_s=s.samples_per_s,
            windows_wait_share=s.wait_share,
            verdict=report.verdict.line if report.verdict is not None else None,
            change=report.change.line if report.change is not None else None,
            proof=report.proof.line if report.proof is not None else None,
        )  # fmt: skip

    @classmethod
    def of_diagnosis(cls, diagnosis: Diagnosis, dataset: str = "-") -> LoopRecord:
        s = diagnosis.summary
        return cls(
            number=0, at=time.time(), kind="diagnose", dataset=dataset, label=s.label,
            epoch=None, steps=s.batches, samples_per_s=s.overall_samples_per_s,
            wait_share=s.overall_wait_share, windows_samples_per_s=s.samples_per_s,
            windows_wait_share=s.wait_share,
            verdict=diagnosis.verdict.line if diagnosis.verdict is not None else None,
        )  # fmt: skip


Run = TrialRecord | ComparisonRecord | LoopRecord
KINDS: dict[str, type[Any]] = {"trial": TrialRecord, "comparison": ComparisonRecord,
                               "loop": LoopRecord}  # fmt: skip


def kind_of(record: Run) -> str:
    return next(kind for kind, cls in KINDS.items() if isinstance(record, cls))


def record_to_dict(record: Run) -> dict[str, Any]:
    """The record as plain data (JSON-ready); a trial's full result is not kept."""
    if isinstance(record, TrialRecord):
        record = replace(record, result=None)
    return dataclasses.asdict(record)


def record_from_dict(kind: str, data: dict[str, Any]) -> Run:
    """A record of `kind` from `record_to_dict`'s data; fields this version does not know are
    left out (a newer writer's), a missing one raises KeyError or TypeError."""
    cls = KINDS[kind]
    known = {f.name for f in dataclasses.fields(cls)} - {"result"}
    data = {k: v for k, v in data.items() if k in known}
    if cls is TrialRecord:
        data["counts"] = tuple(CountFigure(**c) for c in data["counts"])
        data["setup"] = TrialSetup(**data["setup"]) if data.get("setup") else None
    spreads = {"before", "after", "ratio", "windows_samples_per_s", "windows_wait_share"}
    for name in spreads & data.keys():
        data[name] = Spread(**data[name]) if data[name] is not None else None
    record: Run = cls(**data)
    return record


@dataclass(frozen=True)
class FigurePair:
    """One figure of two runs side by side: each a median with its lowest and highest (None:
    that run has no such figure); `unit` says how it reads ("samples/s", "x", "share")."""

    name: str
    unit: str
    first: Spread | None
    second: Spread | None
    # a trial's count without a steady state: its figure is a lower bound ("at least")
    first_at_least: bool = False
    second_at_least: bool = False

    @property
    def apart(self) -> bool:
        """True when the two ranges share no value: a difference beyond what was measured."""
        a, b = self.first, self.second
        return a is not None and b is not None and (a.high < b.low or b.high < a.low)


def compare_runs(first: Run, second: Run) -> tuple[FigurePair, ...]:
    """The figures of two runs of a kind side by side, as stored. Raises ValueError for two
    runs of different kinds (a trial's figures are no loop's)."""
    if kind_of(first) != kind_of(second):
        raise ValueError(
            f"run #{first.number} is a {kind_of(first)} and #{second.number} a "
            f"{kind_of(second)}: compare two trials, two comparisons or two loops"
        )
    if isinstance(first, TrialRecord) and isinstance(second, TrialRecord):
        workers = sorted({c.num_workers for c in (*first.counts, *second.counts)})
        pairs = [(n, first.count(n), second.count(n)) for n in workers]
        return tuple(
            FigurePair(f"num_workers={n}", "samples/s", _spread(a), _spread(b),
                       a is not None and a.lower_bound, b is not None and b.lower_bound)
            for n, a, b in pairs
        )  # fmt: skip
    if isinstance(first, ComparisonRecord) and isinstance(second, ComparisonRecord):
        return (
            FigurePair("your loader", "samples/s", first.before, second.before),
            FigurePair("the recommended one", "samples/s", first.after, second.after),
            FigurePair("after / before", "x", first.ratio, second.ratio),
        )
    assert isinstance(first, LoopRecord) and isinstance(second, LoopRecord)
    return (
        FigurePair("samples/s per window", "samples/s", first.windows_samples_per_s,
                   second.windows_samples_per_s),
        FigurePair("waiting share per window", "share", first.windows_wait_share,
                   second.windows_wait_share),
    )  # fmt: skip


def _spread(count: CountFigure | None) -> Spread | None:
    """A trial's figure for one count as a spread over its slices (their number not kept)."""
    return None if count is None else Spread(count.median, count.low, count.high, 2)


@dataclass(frozen=True)
class History:
    """Trials, comparisons and judged loops, each oldest first."""

    trials: tuple[TrialRecord, ...] = ()
    comparisons: tuple[ComparisonRecord, ...] = ()
    loops: tuple[LoopRecord, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.trials or self.comparisons or self.loops)

    def __len__(self) -> int:
        return len(self.trials) + len(self.comparisons) + len(self.loops)

    def runs(self) -> list[Run]:
        """Every run, in the order of their numbers."""
        return sorted((*self.trials, *self.comparisons, *self.loops), key=lambda r: r.number)

    def run(self, number: int) -> Run | None:
        """The run numbered `number`; None: this history holds none."""
        return next((r for r in self.runs() if r.number == number), None)

    def of(self, dataset: str | None) -> History:
        """The runs of `dataset` only (None: all of them)."""
        if dataset is None:
            return self
        return History(
            tuple(r for r in self.trials if r.dataset == dataset),
            tuple(r for r in self.comparisons if r.dataset == dataset),
            tuple(r for r in self.loops if r.dataset == dataset),
        )

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

"""What measured loops were judged to be: one loader in one loop (`Diagnosis`, the one judged
loop `advisor.decide.judge.JudgedLoop`), two loaders through the same step (`Comparison`), and
the advice put beside the loader a user has
(`BeforeAfter`, with the advised loader's copy to local disk, `LocalCopyStep`). The flows that
run the loops (`advisor.diagnosis`, `advisor.before_after`) make them; `advisor.report` words
them; the run history (`advisor.decide.history`) keeps them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from advisor.core.readable import Readable
from advisor.core.units import data_rate, data_size, duration
from advisor.decide.judge import JudgedLoop
from advisor.decide.recommend import Recommendation
from advisor.decide.verdict import Verdict, input_bound
from advisor.measure.loop.results import Spread
from native_loader.local_copy import CopyReport

__all__ = ["BeforeAfter", "Comparison", "Diagnosis", "LocalCopyStep"]


# the name `advisor.diagnose`'s users know for the loop it judged: the one judged loop
Diagnosis = JudgedLoop


@dataclass(frozen=True)
class Comparison(Readable):
    """Two loaders through the same step, interleaved: one judged loop per loader and round (its
    `str` and notebook display: `advisor.report.diagnosis.comparison_lines`)."""

    before: tuple[JudgedLoop, ...]
    after: tuple[JudgedLoop, ...]

    def ratios(self) -> list[float]:
        """After over before, samples/s, per round (the rounds' medians)."""
        out = []
        for b, a in zip(self.before, self.after, strict=True):
            rb, ra = b.summary.overall_samples_per_s, a.summary.overall_samples_per_s
            if rb is not None and ra is not None and rb > 0:
                out.append(ra / rb)
        return out

    @property
    def speedup(self) -> Spread | None:
        return Spread.of(self.ratios())

    def pooled(self, which: str, name: str) -> Spread | None:
        """A whole-run figure (`overall_wait_share` or `overall_samples_per_s`) of `which`
        loader ("before" or "after") over its rounds: their median, lowest and highest."""
        runs: tuple[JudgedLoop, ...] = getattr(self, which)
        return Spread.of([v for d in runs if (v := getattr(d.summary, name)) is not None])

    def verdicts(self) -> tuple[Verdict | None, Verdict | None]:
        """The verdict on each loader's waiting share, the median of its rounds' (their range
        beside it)."""
        before = self.pooled("before", "overall_wait_share")
        after = self.pooled("after", "overall_wait_share")
        return (
            input_bound(before.median, before) if before is not None else None,
            input_bound(after.median, after) if after is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The facts; `advisor.report.diagnosis.comparison_dict` adds the headline."""
        return {
            "before": [d.to_dict() for d in self.before],
            "after": [d.to_dict() for d in self.after],
            "ratios": self.ratios(),
        }


@dataclass(frozen=True)
class LocalCopyStep:
    """The advised loader's first step where it copies the set to local disk (copy-local), as
    its `prepare()` ran here: the folder, the record of the sync that fetched the copy
    (measured, not assumed: `native_loader.local_copy.CopyReport`), whether that sync was this
    run's (`fresh`; else the copy was made earlier and this run only checked it), the prepare's
    own time, and what the home cache holds after it."""

    folder: str
    report: CopyReport | None
    seconds: float
    home: str  # `homecache.summary()`: its size, and how to list and free it
    fresh: bool = True

    def change(self) -> str:
        """The step, as the first of the changes: "copy 241 MiB to local disk first (7.0 s at
        the measured 33 MiB/s)"."""
        r, checked = self.report, duration(self.seconds)
        if r is None:  # made before copies recorded their syncs, and kept
            return f"read the local copy made earlier (checked in {checked})"
        measured = f"{duration(r.seconds)} at the measured {data_rate(r.bytes_per_s)}"
        if not self.fresh:
            how = f"made earlier in {measured}; up to date, checked in {checked}"
        elif r.copied_bytes == r.bytes:
            how = measured
        else:
            how = f"this run fetched {data_size(r.copied_bytes)} in {measured} and kept the rest"
        return f"copy {data_size(r.bytes)} to local disk first ({how})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "seconds": round(self.seconds, 3),
            "fresh": self.fresh,
            "report": None if self.report is None else dataclasses.asdict(self.report),
            "bytes_per_s": None if self.report is None else round(self.report.bytes_per_s),
        }


@dataclass(frozen=True)
class BeforeAfter(Readable):
    """The advice for the data and the comparison that measured it (the headline people read,
    also its `str` and notebook display: `advisor.report.before_after.before_after_headline`)."""

    first_look: JudgedLoop
    recommendation: Recommendation
    comparison: Comparison
    changed: tuple[str, ...]
    copy: LocalCopyStep | None = None  # the advised loader copies the set first (copy-local)

    def to_dict(self) -> dict[str, Any]:
        """The facts; `advisor.report.before_after.before_after_dict` puts the headline first."""
        return {
            "changed": list(self.changed),
            "local_copy": None if self.copy is None else self.copy.to_dict(),
            "first_look": self.first_look.to_dict(),
            "comparison": self.comparison.to_dict(),
        }

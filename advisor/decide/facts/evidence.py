"""The trial's training-loop measurement as evidence: which measured counts count, and which
were left out.

Per num_workers the trial measured a median and a spread over interleaved slices, per step model
(`CountRate` in `advisor.measure.trial.results`). A count that reached no steady state measured a
lower bound: it counts only where it reaches the best steady median (its count is at least that
fast); below, it would stand for a count slower than the trial showed, so it is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from advisor.measure.trial.results import CountRate, summarise

if TYPE_CHECKING:  # trial.py pulls in torch and the native reader; rules only read its fields
    from advisor.measure.trial.results import TrialResult


@dataclass(frozen=True)
class SweepEvidence:
    """The measured counts of one trial (none without a trial)."""

    counts: tuple[CountRate, ...]

    @classmethod
    def of(cls, trial: TrialResult | None) -> SweepEvidence:
        """The trial's counts (summarised from its slices for a trial that recorded none)."""
        if trial is None:
            return cls(())
        counts = trial.counts or summarise(trial.sweep)
        return cls(tuple(c for c in counts if c.median > 0))

    @cached_property
    def best_steady_rate(self) -> float:
        return max((c.median for c in self.counts if not c.lower_bound), default=0.0)

    @cached_property
    def kept(self) -> dict[int, CountRate]:
        """Per num_workers, its count, lower bounds only where they count."""
        return {
            c.num_workers: c
            for c in self.counts
            if not c.lower_bound or c.median >= self.best_steady_rate
        }

    @cached_property
    def lower_bounds_left_out(self) -> dict[int, float]:
        """num_workers whose measurement was a lower bound below the steady counts."""
        return {c.num_workers: c.median for c in self.counts if c.num_workers not in self.kept}

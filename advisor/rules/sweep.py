"""The trial's DataLoader sweep as evidence: which measured rates count, and which were left out.

A point that reached no steady state (`LoaderPoint.steady`) measured a lower bound, start-up
included: it counts only where it beats every steady point (its count is at least that fast);
below them it would stand for a count slower than the trial showed, so it is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # trial.py pulls in torch and the native reader; rules only read its fields
    from advisor.trial import LoaderPoint, TrialResult


@dataclass(frozen=True)
class SweepEvidence:
    """The measured points of one trial's sweep (none without a trial)."""

    points: tuple[LoaderPoint, ...]

    @classmethod
    def of(cls, trial: TrialResult | None) -> SweepEvidence:
        sweep = trial.sweep if trial is not None else ()
        return cls(tuple(p for p in sweep if p.samples_per_s > 0))

    @cached_property
    def best_steady_rate(self) -> float:
        return max((p.samples_per_s for p in self.points if p.steady), default=0.0)

    @cached_property
    def rates(self) -> dict[int, float]:
        """Best measured samples/s per num_workers, lower bounds only where they count."""
        rates: dict[int, float] = {}
        for p in self.points:
            if p.steady or p.samples_per_s > self.best_steady_rate:
                rates[p.num_workers] = max(rates.get(p.num_workers, 0.0), p.samples_per_s)
        return rates

    @cached_property
    def lower_bounds_left_out(self) -> dict[int, float]:
        """num_workers whose only measurement was a lower bound below the steady points."""
        kept = self.rates
        return {
            p.num_workers: p.samples_per_s
            for p in self.points
            if not p.steady and p.num_workers not in kept
        }

"""Which num_workers the trial measures, chosen as it measures: the count search.

A trial cannot measure every count on a machine of 8 to 96 cores; its budget holds a handful
(`limit`). The model proposes where to start, and the measurements decide where to go next:

- Where the budget holds every count from 0 to the cores, all are measured, interleaved.
- Else it measures 0 (the loader in the training process) and the model's choice first. Then,
  while the best measured count is also the highest measured, and neither the consumer's rate
  nor a measured ceiling (the cores' busy CPU per sample, the storage) is reached there, it
  measures a count above it: the count that reaches the nearest of those goals at the measured
  rate per worker, or, with none known, a step that reaches the cores within the counts left.
  A model that was wrong about the cores sends the first guess astray; the rates measured
  bring the search back.
- Once a count above the best is slower (or the goals leave no room above it), it halves the
  widest gap next to the best: below it, where fewer workers may read as fast, or above it,
  where the peak of a curve that rises and then falls may lie.

Pure: `next_count` takes what was measured and returns a count, so a test can drive it over
synthetic rate curves with the trial's slice count and noise (tests/measure/test_count_search.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from advisor.core.model import NOISE_CAP
from advisor.measure.trial.probe_results import StorageProbe
from advisor.measure.trial.results import STEP_NONE, STEP_SLEEP, STEP_SPIN, LoaderPoint

# A measured rate within this share of a goal (the consumer's rate with headroom, a ceiling)
# has reached it: the goal's own estimate is no closer than that.
GOAL_SHARE = 0.95
# Counts whose medians lie within this share of the best read as fast as it: the noise a slice
# median carries (the rules' NOISE_CAP).
SAME_SHARE = 0.05
RESERVE = 2


@dataclass(frozen=True)
class CountSearch:
    """The count search of one sweep: `cores` (the highest count), `predicted` (the model's rate
    as training sees it, per count), `limit` (counts the budget holds) and `goal` (the consumer's
    rate with headroom: a count that delivers it needs no more workers; None without one)."""

    cores: int
    predicted: Mapping[int, float]
    limit: int
    goal: float | None = None

    @property
    def every(self) -> bool:
        """True when the budget holds every count from 0 to the cores."""
        return self.cores + 1 <= self.limit

    def model_choice(self) -> int:
        """The model's count (at least 1): the smallest predicted to reach the goal, else the
        smallest within 5% of the best prediction."""
        counts = range(1, max(self.cores, 1) + 1)
        rates = {w: self.predicted.get(w, 0.0) for w in counts}
        if self.goal is not None:
            reached = [w for w in counts if rates[w] >= self.goal]
            if reached:
                return reached[0]
        best = max(rates.values(), default=0.0)
        return next((w for w in counts if rates[w] >= (1 - SAME_SHARE) * best), 1)

    def first(self) -> list[int]:
        """The counts measured first, interleaved: every count, or 0 and the model's choice."""
        if self.every:
            return list(range(self.cores + 1))
        return sorted({0, min(self.model_choice(), self.cores)})

    def next_count(self, rates: Mapping[int, float], ceiling: float | None = None) -> int | None:
        """The next count to measure, given the median `rates` measured so far (the slower step
        model's) and the measured `ceiling` at the best count (samples/s the cores or the
        storage allow, None: none measured). None: nothing left worth measuring, or no budget."""
        if self.every or len(rates) >= self.limit or not rates:
            return None
        best = max(rates, key=lambda w: (rates[w], -w))
        if best == max(rates) and best < self.cores and self._room_above(rates[best], ceiling):
            return self._up(best, rates, ceiling)
        return self._refine(best, rates)

    def _goals(self, rate: float, ceiling: float | None) -> list[float]:
        """The consumer's goal and the measured ceiling; a ceiling that the measured `rate`
        exceeds beyond the noise was estimated wrong, and is no goal."""
        goals = [self.goal] if self.goal is not None and self.goal > 0 else []
        if ceiling is not None and ceiling > 0 and rate <= (1 + SAME_SHARE) * ceiling:
            goals.append(ceiling)
        return goals

    def _room_above(self, rate: float, ceiling: float | None) -> bool:
        """True when no goal is reached at `rate`: more workers may still read faster."""
        return all(rate < GOAL_SHARE * g for g in self._goals(rate, ceiling))

    def _up(self, best: int, rates: Mapping[int, float], ceiling: float | None) -> int:
        """A count above `best`: where the nearest goal is reached at the rate per worker
        measured there; with none known, a step that reaches the cores with the counts left
        (one kept to halve a gap)."""
        goals = self._goals(rates[best], ceiling)
        per_worker = rates[best] / max(best, 1)
        if goals and per_worker > 0:
            wanted = math.ceil(min(goals) / per_worker)
        else:
            steps = max(self.limit - len(rates) - 1, 1)
            factor = max(2.0, (self.cores / max(best, 1)) ** (1 / steps))
            wanted = math.ceil(max(best, 1) * factor)
        return min(max(wanted, best + 1), self.cores)

    def _refine(self, best: int, rates: Mapping[int, float]) -> int | None:
        """The middle of the widest gap next to the best: between the next measured count below
        the smallest count as fast as the best and that count, or between the best and the next
        measured above it. None: the neighbours are measured."""
        same = min(w for w in rates if rates[w] >= (1 - SAME_SHARE) * rates[best])
        gaps: list[tuple[int, int]] = []
        below = [w for w in rates if w < same]
        if below:
            gaps.append((max(below), same))
        above = [w for w in rates if w > best]
        if above:
            gaps.append((best, min(above)))
        gaps = [(lo, hi) for lo, hi in gaps if hi - lo > 1]
        if not gaps:
            return None
        lo, hi = max(gaps, key=lambda g: (g[1] - g[0], -g[0]))
        return (lo + hi) // 2


def step_modes(consumer_rate: float | None, predicted_rate: float, cores: float) -> tuple[str, ...]:
    """The step models the sweep measures: none without a consumer rate; else a blocking and a
    spinning step where they can disagree. A spinning step holds its core for the share
    rate / consumer_rate of the time, which the loaders lose at most over the `cores`: under
    NOISE_CAP of them (at the model's best rate), the two read the same within the noise, so
    the spinning one alone is measured and the budget goes to more counts."""
    if not consumer_rate:
        return (STEP_NONE,)
    spin_share = min(predicted_rate / consumer_rate, 1.0)
    if spin_share / max(cores, 1) < NOISE_CAP:
        return (STEP_SPIN,)
    return (STEP_SLEEP, STEP_SPIN)


def measured_ceiling(
    points: Sequence[LoaderPoint], best: int, *, cores: float, storage: StorageProbe | None,
    spo: float,
) -> float | None:  # fmt: skip
    """The lowest ceiling measured at the count `best`, samples/s: the cores over the busy CPU
    per sample there (the spin left out), and the storage's best objects/s where its curve
    saturated. None: neither measured."""
    busy = [
        p.machine_cpu_s_per_sample
        for p in points
        if p.num_workers == best and p.machine_cpu_s_per_sample
    ]
    ceilings = [cores / statistics.median(busy)] if busy else []
    if storage is not None and storage.saturated and storage.best_objects_s > 0:
        ceilings.append(storage.best_objects_s * spo)
    return min(ceilings, default=None)

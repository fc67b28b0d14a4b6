"""NW-3's reasoning on the measured counts: which it chooses, how sure it can be, and the table
that shows them beside the model's predictions.

A choice is only as firm as the noise lets it be: a count that came within the noise of the
line the choice drew (a smaller count just short of the best's score, or of the consumer's
rate with headroom; a larger one just short of the best, which a repeat may make the best) may
be chosen by the next trial on the same inputs. Such a count is named
(`MeasuredChoice.close`), and the confidence is not high while one is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.decide.facts.context import Context
from advisor.decide.keys import State
from advisor.decide.thresholds import HEADROOM, NOISE_CAP
from advisor.measure.trial.results import CountRate, StepRate


@dataclass(frozen=True)
class MeasuredChoice:
    """The count NW-3 chooses (`count`), the best-scoring one (`top`), why ("headroom",
    "best", or "noise:T" with T the tolerance the choice was within, as a share of the best),
    and the measured counts that came within the noise of the line it drew (`close`)."""

    count: int
    top: int
    reason: str
    close: tuple[int, ...] = ()


def choose(counts: Mapping[int, CountRate], consumer: float | None) -> MeasuredChoice:
    """NW-3's choice among `counts` (see `choose_measured`), with the counts close to it."""
    best: dict[str, StepRate] = {}
    for c in counts.values():
        for s in c.steps:
            if s.step not in best or s.median > best[s.step].median:
                best[s.step] = s

    def score(c: CountRate) -> float:
        return min(s.median / best[s.step].median for s in c.steps if best[s.step].median > 0)

    def tolerance(c: CountRate) -> float:
        shares = [
            max(s.noise, best[s.step].noise) / best[s.step].median
            for s in c.steps
            if best[s.step].median > 0
        ]
        return min(max(shares, default=0.0), NOISE_CAP)

    def margin(c: CountRate) -> float:
        """How far below a line a count still lies within the noise of it."""
        return max(2 * tolerance(c), NOISE_CAP)

    top = max(counts, key=lambda w: (score(counts[w]), -w))
    line = score(counts[top])
    for w in sorted(counts):
        c = counts[w]
        smaller = [counts[v] for v in sorted(counts) if v < w]
        if consumer is not None and all(s.median >= consumer * HEADROOM for s in c.steps):
            near = consumer * HEADROOM * (1 - NOISE_CAP)
            close = tuple(d.num_workers for d in smaller if all(s.median >= near for s in d.steps))
            return MeasuredChoice(w, top, "headroom", close)
        if score(c) >= line - tolerance(c):
            close = tuple(d.num_workers for d in smaller if score(d) >= line - margin(d))
            if w == top:
                # a larger count that close to the best may be the best in a repeat, and then
                # this one may no longer lie within the noise of it
                larger = [d for v, d in sorted(counts.items()) if v > w]
                close += tuple(d.num_workers for d in larger if score(d) >= line - margin(d))
                return MeasuredChoice(w, top, "best", close)
            return MeasuredChoice(w, top, f"noise:{tolerance(c):.3f}", (*close, top))
    return MeasuredChoice(top, top, "best")


def choose_measured(
    counts: Mapping[int, CountRate], consumer: float | None
) -> tuple[int, int, str]:
    """(the count NW-3 chooses, the best-scoring count, why: "headroom", "best", or "noise:T"
    with T the tolerance the choice was within, as a share of the best).

    A count's score is the lowest, over the step models, of its median over that model's best
    median: a count good with a blocking step but not with a spinning one (or the reverse)
    scores low. Its tolerance is the larger half-range of its own slices and the model's best
    count's, as a share of that best, the largest over the models, and at most NOISE_CAP.
    """
    choice = choose(counts, consumer)
    return choice.count, choice.top, choice.reason


def sweep_table(ctx: Context, state: State) -> dict[str, dict[str, Any]]:
    """Per measured num_workers: median, spread, lower bound, the model's prediction (what
    training sees, samples/s) and its error against the median, and the training thread's
    share of a core as measured and as the model predicts it."""
    table: dict[str, dict[str, Any]] = {}
    for c in ctx.sweep.counts:
        model = ctx.model(state, c.num_workers)
        predicted = ctx.predicted_rate(state, c.num_workers)  # the one predicted figure
        measured_share = ctx.trial.measured_share(c.num_workers) if ctx.trial else None
        table[str(c.num_workers)] = {
            "median": round(c.median, 1),
            "low": round(c.low, 1),
            "high": round(c.high, 1),
            "lower_bound": c.lower_bound,
            "step": c.step,
            "predicted": round(predicted, 1),
            "error": round(predicted / c.median - 1, 3) if c.median else None,
            "training_share": None if measured_share is None else round(measured_share, 3),
            "predicted_training_share": round(model.training_share, 3),
        }
    return table

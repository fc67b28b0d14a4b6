"""The one judge of a measured loop: whichever front measured it (`diagnose`, `compare`, the
before/after, `advisor.watch`, the training frameworks' callbacks), a loop is judged by
`judge` into one `JudgedLoop`: the verdict on its waits, the bottleneck named from its
measurements (`advisor.decide.bottleneck.of_loop`), what its loader trips over
(`advisor.decide.trips`), and one change with the rate the model predicts for it
(`advisor.decide.watching`). The same loop gets the same judgement from every front.

What the machine's other work took is the loop's own figure (`LoopRun.others_cores`, measured
by the instrumented loop), and so is what its loader is (`LoaderFacts`, read once from the
loader it iterated and its first batch).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from advisor.core.readable import Readable
from advisor.decide.bottleneck import Bottleneck, of_loop
from advisor.decide.trips import Trip, find_trips
from advisor.decide.verdict import Verdict, input_bound
from advisor.decide.watching import (
    Change,
    Proof,
    more_workers_change,
    persistent_workers_change,
    predicted_gain,
)
from advisor.measure.loop.handover import Handover
from advisor.measure.loop.results import LoopRun, LoopSummary
from advisor.measure.loop.watch import LoaderFacts

__all__ = ["JudgedLoop", "judge"]

MIN_STEPS = 20  # a loop judged as it runs (`advisor.watch`) waits for this many steps


@dataclass(frozen=True)
class JudgedLoop(Readable):
    """One measured loop, judged: the measured summary; the verdict and the bottleneck (None:
    too few steps to judge); what the loader's settings trip over; the one change advised
    (None: none is predicted to read faster beyond the noise); what the loader and its first
    batch said (None: no batch came); and, where the advised loader was swapped in during the
    run (`advisor.watch`), the prediction beside what was measured. Its `str` and notebook
    display: `advisor.report.diagnosis.diagnosis_lines`."""

    summary: LoopSummary
    verdict: Verdict | None
    bottleneck: Bottleneck | None
    trips: tuple[Trip, ...] = ()
    change: Change | None = None
    facts: LoaderFacts | None = None
    proof: Proof | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def judge(
    run: LoopRun,
    facts: LoaderFacts | None,
    usable_cores: float,
    *,
    min_steps: int = MIN_STEPS,
    handover: Handover | None = None,
) -> JudgedLoop:
    """The loop judged; the verdict, bottleneck and change wait for `min_steps` steps.
    `usable_cores`: the cores this process may use (the change is predicted on those that the
    loop's other work, `run.others_cores`, left). `handover`: what a batch like the loader's
    costs to cross from a worker (`LoaderFacts.handover`; None: not measured, left out of the
    prediction)."""
    summary = LoopSummary.of(run)
    trips = tuple(find_trips(summary, run, facts))
    if len(run.wait_s) < max(min_steps, 1) or summary.overall_wait_share is None:
        return JudgedLoop(summary, None, None, trips, None, facts)
    verdict = input_bound(summary.overall_wait_share, summary.wait_share)
    workers = facts.loading_workers if facts is not None else None
    found = of_loop(summary, usable_cores, workers, machine_busy(run, summary, usable_cores))
    free = max(usable_cores - (run.others_cores or 0.0), 1.0)
    changes = [
        more_workers_change(run, summary, found, facts, usable_cores, free, handover),
        persistent_workers_change(run, summary, facts),
    ]
    offered = [c for c in changes if c is not None]
    change = max(offered, key=predicted_gain, default=None)
    return JudgedLoop(summary, verdict, found, trips, change, facts)


def machine_busy(run: LoopRun, summary: LoopSummary, usable_cores: float) -> float | None:
    """The share of the usable cores busy with anything over the loop: the loop's process
    tree's CPU and the other work's cores (`run.others_cores`) over the loop's time; None where
    the other work was not measured."""
    if run.others_cores is None or summary.seconds <= 0 or usable_cores <= 0:
        return None
    return min((run.cpu_s / summary.seconds + run.others_cores) / usable_cores, 1.0)

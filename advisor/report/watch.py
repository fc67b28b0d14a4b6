"""The user's own training loop as `advisor.watch` judged it (`advisor.decide.watching`), as
people read it: the verdict, the bottleneck, one change, what was found, the proof, the run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.units import duration, rate

if TYPE_CHECKING:
    from advisor.decide.watching import WatchReport


def watch_lines(report: WatchReport) -> list[str]:
    """The report, one finding a line: what `advisor.watch` prints at the end of the loop."""
    s = report.summary
    out = [report.verdict.line if report.verdict else "too few steps to judge yet"]
    if report.bottleneck is not None:
        out.append(report.bottleneck.line)
    if report.change is not None:
        out.append(f"change: {report.change.line}")
    out += [f"found: {trip.line}" for trip in report.trips]
    if report.proof is not None:
        out.append(f"proof: {report.proof.line}")
    if s.overall_samples_per_s is not None:
        out.append(
            # the whole run, the swap and each epoch's start included: not the proof's figure
            f"{s.batches} steps, {rate(s.overall_samples_per_s)} over the whole run; first "
            "batch after "
            f"{duration(s.time_to_first_batch_s)}"
        )
    return out

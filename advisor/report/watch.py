"""The user's own training loop as `advisor.watch` judged it (`advisor.decide.judge`), as
people read it: the verdict, the bottleneck, one change, what was found, the proof, the run;
and the lines it prints as the loop runs (`window_line` every few steps until the first report,
then `epoch_line`, one an epoch); the notebook's live view shows `start_line`, then `live_line`
as its headline and `watch_lines` when the loop ends, and `LEVEL_MARKS` and `swap_mark` on its
chart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.units import counted, duration, rate, share
from advisor.decide.verdict import HIGHLY_INPUT_BOUND, INPUT_BOUND, input_bound

if TYPE_CHECKING:
    from advisor.decide.judge import JudgedLoop
    from advisor.decide.watching import Change, Proof


def watch_lines(report: JudgedLoop) -> list[str]:
    """The report, one finding a line: what `advisor.watch` prints at the end of the loop (the
    judged loop's full lines, its figures included: `advisor.report.diagnosis`)."""
    s = report.summary
    out = [report.verdict.line if report.verdict else "too few steps to judge yet"]
    if report.bottleneck is not None:
        out.append(report.bottleneck.line)
    out += findings(report)
    if s.overall_samples_per_s is not None:
        out.append(
            # the whole run (or since the swap), each epoch's start included: not the proof's
            f"{s.batches} steps{' since the swap' if report.proof else ''}, "
            f"{rate(s.overall_samples_per_s)} over "
            f"{'them' if report.proof else 'the whole run'}; first batch after "
            f"{duration(s.time_to_first_batch_s)}"
        )
    return out


# the verdict's levels as the live chart marks them: (waiting share, the words beside its line)
LEVEL_MARKS = (
    (INPUT_BOUND, f"{share(INPUT_BOUND)}: input-bound above"),
    (HIGHLY_INPUT_BOUND, f"{share(HIGHLY_INPUT_BOUND)}: highly input-bound above"),
)


def start_line(label: str) -> str:
    """The live view's headline before the first step is measured."""
    return f"{label}, first steps…"


def _setting(change: Change) -> str:
    """ "num_workers 0 -> 2"."""
    return f"{change.setting} {change.now} -> {change.to}"


def swap_mark(change: Change) -> str:
    """The words beside the live chart's mark where the changed loader starts reading."""
    return f"swapped: {_setting(change)}"


def swap_line(function: str, change: Change) -> str:
    """The line said when the loader's function (`function`, its name) makes the advised loader
    for the next epoch."""
    return (
        f"from the next epoch on, {function}({change.setting}={change.to!r}): "
        f"{_setting(change)}, the advised loader"
    )


def no_swap_line(function: str, change: Change) -> str:
    """The line said when the loader's function cannot take the advised setting."""
    return (
        f"{function}() takes no {change.setting} argument: give it one to have the advised "
        "loader swapped in at the next epoch"
    )


def live_line(step: int, wait_share: float, samples_per_s: float, judged: bool) -> str:
    """The live view's headline at `step`: the verdict's level once there are enough steps to
    judge (`judged`), "watching" before, the waiting share and the rate."""
    level = input_bound(wait_share).level if judged else "watching"
    return f"step {step}: {level}, waiting {share(wait_share)} of each step, {rate(samples_per_s)}"


def findings(report: JudgedLoop) -> list[str]:
    """What the judge found beyond the verdict and the bottleneck, a line each: the change,
    what the loader trips over, the proof of a change swapped in."""
    out = [f"change: {report.change.line}"] if report.change is not None else []
    out += [f"found: {trip.line}" for trip in report.trips]
    if report.proof is not None:
        out.append(f"proof: {report.proof.line}")
    return out


def window_line(step: int, wait_share: float, samples_per_s: float, steps: int) -> str:
    """The loop at `step`: its waiting share and rate over the last `steps` steps."""
    return (
        f"step {step}: waiting {share(wait_share)} of each step, {rate(samples_per_s)} over "
        f"the last {steps}"
    )


def epoch_line(
    epoch: int, wait_share: float, samples_per_s: float, steps: int, proof: Proof | None = None
) -> str:
    """One line for an epoch after the first report: its verdict, waiting share and rate; the
    first epoch measured after a swap gives the proof instead."""
    if proof is not None:
        return f"epoch {epoch}: proof: {proof.line}"
    return (
        f"epoch {epoch}: {input_bound(wait_share).level}, waiting {share(wait_share)} of each "
        f"step, {rate(samples_per_s)} over its {counted(steps, 'step')}"
    )

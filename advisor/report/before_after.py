"""The user's loader against the advised one (`advisor.before_after`), as people read
it: the headline, the lines `python -m advisor diagnose --uri` prints, and its JSON with the
headlines in it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.core.readable import lines_for
from advisor.report.diagnosis import comparison_dict, comparison_lines, diagnosis_lines
from advisor.report.next_step import keep_up_action

if TYPE_CHECKING:
    from advisor.decide.judged import BeforeAfter, LocalCopyStep


@lines_for("advisor.decide.judged.BeforeAfter")
def before_after_headline(result: BeforeAfter) -> list[str]:
    """A few lines: what to change and its measured effect; the verdicts; the local copy; the
    user's loader's bottleneck; one next step where the advised loader cannot keep up."""
    what = ", ".join(result.changed) or "the recommended loader"
    lines = comparison_lines(result.comparison, what)
    if result.copy is not None:
        lines.append(copy_note(result.copy))
    if result.first_look.bottleneck is not None:
        # its figures are the first look's, on its own: not the interleaved rounds' above
        lines.append(f"your loader's {result.first_look.bottleneck.line} (on its own, first)")
    action = keep_up_action(result.recommendation, result.comparison)
    if action is not None:  # the recommended loader still cannot keep up: one next step
        lines.append(action)
    return lines


def before_after_lines(result: BeforeAfter) -> list[str]:
    """What `diagnose --uri` prints: the headline, then the user's loader on its own."""
    return [
        *before_after_headline(result), "",
        "your loader, on its own first (this run also sized the advice):",
        *diagnosis_lines(result.first_look),
    ]  # fmt: skip


def before_after_dict(result: BeforeAfter) -> dict[str, Any]:
    """`diagnose --uri --json`: the headline first, then the result's facts (`to_dict`), the
    comparison's with its headline."""
    data = {"headline": before_after_headline(result), **result.to_dict()}
    data["comparison"] = comparison_dict(result.comparison)
    return data


def copy_note(copy: LocalCopyStep) -> str:
    """Where the advised loader's local copy is, and what the home cache holds after it."""
    return f"The local copy is in {copy.folder}; {copy.home}."

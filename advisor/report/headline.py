"""The recommendation's first lines: what to change, and its measured effect.

With the user's own loader measured (`diagnose` through the same step), the headline sets its
rate and data-wait share beside what the trial measured at the recommended settings. Without
one, it gives the trial's measured waiting share at the recommended settings: at the chosen
num_workers the loop waits for data 1 - measured rate / consumer rate of each step. The last
line names the bottleneck from the measurements (the user's loop's, else the trial's at the
recommended count: `advisor.decide.bottleneck`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from advisor.core.units import counted, data_size, duration, per_s, rate, share
from advisor.decide.verdict import INPUT_BOUND
from advisor.report.diagnosis import comparison_headline
from advisor.report.next_step import keep_up_action, one_action

if TYPE_CHECKING:
    from advisor.decide.judged import Comparison, Diagnosis
    from advisor.decide.recommend import Recommendation
    from advisor.measure.loop.results import LoopSummary, Spread
    from advisor.measure.trial.results import CountRate, TrialResult


def what_to_change(rec: Recommendation, changed: tuple[str, ...] = ()) -> str:
    """The settings in a few words: the changes to the user's loader, else the settings."""
    if changed:
        return ", ".join(changed)
    parts = [f"num_workers={rec.num_workers}", f"pin_memory={rec.pin_memory}"]
    if rec.num_workers and rec.prefetch_factor:
        parts.append(f"prefetch_factor={rec.prefetch_factor}")
    return "DataLoader(" + ", ".join(parts) + f"), {reading(rec)}"


def reading(rec: Recommendation) -> str:
    """Where the loader reads, in plain words: a folder in place, a local copy, or the source."""
    if rec.data_source != "copy-local":
        return f"reading from {rec.data_source}"
    if rec.sagemaker_input_mode is None:  # a folder on this machine
        return "reading the folder in place"
    return "reading a local copy, made before the first epoch"


def chosen_count(rec: Recommendation, trial: TrialResult | None) -> CountRate | None:
    """The trial's measurement at the recommended num_workers (None: not measured, or measured
    on what training will not read: the recommendation has no measured rate then, and the
    model decided)."""
    if trial is None or rec.measured_samples_per_s is None:
        return None
    return next((c for c in trial.counts if c.num_workers == rec.num_workers), None)


def wait_share(measured: float, consumer_rate: float) -> float:
    """The share of each step the loop waits for data when the loader delivers `measured` of
    the `consumer_rate` samples/s the step takes: 1 - measured / consumer, at least 0."""
    return max(0.0, 1.0 - measured / consumer_rate) if consumer_rate > 0 else 0.0


def headline_lines(
    rec: Recommendation,
    trial: TrialResult | None,
    consumer_rate: float | None,
    diagnosis: Diagnosis | None = None,
    changed: tuple[str, ...] = (),
    comparison: Comparison | None = None,
    brief: bool = False,
) -> list[str]:
    """A few lines: what to change, and its measured effect: the user's loader and the
    recommended one in the same loop where they were compared, else the trial's figures; the
    bottleneck; and where the loader still cannot keep up, one next step ("To keep up: ...",
    `keep_up_action`), last. `brief`: the verdict (`verdict_headline`, 25 words at most) in
    place of the bottleneck and the step's reasons, for a front that prints the bottleneck
    beside it (the command line's summary)."""
    if brief:
        full = headline_lines(rec, trial, consumer_rate, diagnosis, changed, comparison)
        short = verdict_headline(rec, comparison)
        kept = full[: len(full) - len(_bottleneck_line(rec, diagnosis, comparison))
                    - len(_action(rec, comparison))]  # fmt: skip
        return kept + ([short.text] if short is not None else [])
    lines = [*_job_line(rec), f"Change: {what_to_change(rec, changed)}."]
    if comparison is not None and comparison.speedup is not None:
        lines.append(
            f"Your loader -> the recommended one, in your loop: {comparison_headline(comparison)}."
        )
        was, now = comparison.verdicts()
        if was is not None and now is not None:
            lines.append(f"Before: {was.line}; after: {now.line}.")
        return lines + _bottleneck_line(rec, diagnosis, comparison) + _action(rec, comparison)
    count = chosen_count(rec, trial)
    after = count.median if count is not None else None
    lower = count is not None and count.lower_bound  # a rate that is a lower bound...
    bound = "at least " if lower else ""
    most = "at most " if lower else ""  # ...makes its waiting share an upper bound
    mine = diagnosis.summary if diagnosis is not None else None
    before_rate, before_wait = _whole_run(mine)
    if before_rate is not None and after is not None:
        after_wait = wait_share(after, consumer_rate) if consumer_rate else None
        effect = f"Your loader {per_s(before_rate)} -> {bound}{rate(after)}"
        if after_wait is not None:
            effect += f", data wait {share(before_wait)} -> {most}{share(after_wait)} of each step"
        lines.append(effect + " (your loader in your loop; the recommended settings in the trial).")
    elif after is not None and consumer_rate:
        waits = wait_share(after, consumer_rate)
        lines.append(
            f"Measured at num_workers={rec.num_workers}: {bound}{rate(after)} of the "
            f"{rate(consumer_rate)} one GPU consumes: the training waits for data "
            f"{most}{share(waits)} of each step."
        )
    elif after is not None:
        lines.append(f"Measured at num_workers={rec.num_workers}: {bound}{rate(after)}.")
    elif trial is not None and _planned_elsewhere(rec):
        lines.append(
            f"Expected at num_workers={rec.num_workers}: {rate(rec.expected_samples_per_s)} "
            "(predicted for the training machine from the costs the trial measured here"
            f"{_if_blocking(rec)})."
        )
    elif trial is not None:
        lines.append(
            f"Expected at num_workers={rec.num_workers}: {rate(rec.expected_samples_per_s)} "
            "(predicted: the trial did not read what training will read; see num_workers)."
        )
    else:
        lines.append(
            f"Expected: {rate(rec.expected_samples_per_s)} (not measured: run the live trial)."
        )
    if mine is not None and (before_rate is None or after is None):
        judged = diagnosis.verdict.line if diagnosis and diagnosis.verdict else ""
        lines.append(f"Your loader: {judged or 'measured, see below'}.")
    return lines + _bottleneck_line(rec, diagnosis) + _action(rec, None)


def _if_blocking(rec: Recommendation) -> str:
    """The rate a step that leaves its core to the loading sees, where it reads higher than the
    expected one (a step that holds its core: a CUDA sync that spins)."""
    blocking = rec.predicted_blocking_samples_per_s
    if blocking is None or rate(blocking) == rate(rec.expected_samples_per_s):
        return ""
    return f"; {rate(blocking)} where the training step waits without holding its core"


def _planned_elsewhere(rec: Recommendation) -> bool:
    """True when the recommendation plans for a target machine (PLAN-3 fired)."""
    return any("PLAN-3" in d.rules for d in getattr(rec, "decisions", ()))


def _job_line(rec: Recommendation) -> list[str]:
    """The job first, where the plan is for many ranks or another machine (PLAN-1): its
    samples/s over its ranks, and what it reads before its first batch."""
    decisions = getattr(rec, "decisions", ())  # tests' stand-ins may have none
    job = next((d for d in decisions if d.name == "job" and "PLAN-1" in d.rules), None)
    if job is None:
        return []
    e = job.evidence
    line = f"The job: {rate(e['job_samples_per_s'])} over {counted(e['ranks'], 'rank')}"
    reading = e.get("ranks_reading", e["ranks"])
    if reading < e["ranks"]:
        line += f", {reading} of them dealt data"
    if rec.consumer_rate is not None:
        line += f" (they consume {rate(rec.consumer_rate * e['ranks'])})"
    for key, noun in (("first_batch_gets", "GET"), ("first_batch_reads", "read")):
        if e.get(key) is not None:
            line += (
                f"; before its first batch {counted(e[key], noun)} "
                f"({data_size(e['first_batch_bytes'])}), about {duration(e['first_batch_s'])}"
            )
    return [line + "."]


def _action(rec: Recommendation, comparison: Comparison | None) -> list[str]:
    action = keep_up_action(rec, comparison)
    return [action] if action is not None else []


HEADLINE_WORDS = 25  # the verdict a person reads first; the reasoning is in the evidence
Tone = Literal["keeps-up", "within-noise", "short"]


@dataclass(frozen=True)
class Headline:
    """The verdict in one sentence of at most HEADLINE_WORDS words, and its tone: "keeps-up";
    "within-noise" (short, by less than the trial's measured spread); "short" (beyond the
    noise: the only tone shown in red, with the one action)."""

    text: str
    tone: Tone


def verdict_headline(rec: Recommendation, comparison: Comparison | None = None) -> Headline | None:
    """Whether the recommended loader keeps up with the consumer, as the measurements say: in
    the user's loop where the two loaders were compared, else the expected rate against the
    consumer's (MEAS-3's `input_bound`, and its `within_noise`: the chosen count's slices on both
    sides of the rate that keeps up). None: no consumer rate to keep up with."""
    waits = comparison.pooled("after", "overall_wait_share") if comparison is not None else None
    if waits is not None:
        return _in_your_loop(rec, waits)
    consumer = getattr(rec, "consumer_rate", None)  # tests' stand-ins may have none
    input_bound = getattr(rec, "input_bound", None)
    if consumer is None or input_bound is None:
        return None
    expected = rec.expected_samples_per_s
    if not input_bound:
        return Headline(
            f"The loader keeps up: {per_s(min(expected, consumer))} of the {rate(consumer)} "
            "the training takes.",
            "keeps-up",
        )
    short = share(max(1.0 - expected / consumer, 0.0))
    if _within_noise(rec):
        return Headline(
            f"The loader is short by {short}, within the measured noise: a repeat may find it "
            "keeping up.",
            "within-noise",
        )
    return Headline(f"The loader cannot keep up: short by {short}. {one_action(rec)}", "short")


def _in_your_loop(rec: Recommendation, waits: Spread) -> Headline:
    """The verdict on the recommended loader's waiting share in the user's loop (its rounds'
    median, their range the noise): under the verdict's 5%, it keeps up."""
    waited = share(waits.median)
    if waits.median <= INPUT_BOUND:
        return Headline(
            f"The recommended loader keeps up in your loop: it waits {waited} of each step.",
            "keeps-up",
        )
    if waits.low <= INPUT_BOUND:
        return Headline(
            f"With the recommended loader your loop waits {waited} of each step, within the "
            "measured noise of keeping up.",
            "within-noise",
        )
    return Headline(
        f"Your loop still waits {waited} of each step with the recommended loader. "
        f"{one_action(rec)}",
        "short",
    )


def _within_noise(rec: Recommendation) -> bool:
    decisions = getattr(rec, "decisions", ())  # tests' stand-ins may have none
    throughput = next((d for d in decisions if d.name == "throughput"), None)
    return bool(throughput is not None and throughput.evidence.get("within_noise"))


def _bottleneck_line(
    rec: Recommendation, diagnosis: Diagnosis | None, comparison: Comparison | None = None
) -> list[str]:
    """The user's loader's bottleneck where it was measured, else the trial's at the
    recommended count; none where neither was. Beside a comparison (the medians of its
    interleaved rounds), the bottleneck's figures are its first round's, and say so."""
    mine = getattr(diagnosis, "bottleneck", None)  # tests' stand-ins may have none
    trial = getattr(rec, "bottleneck", None)
    if mine is not None:
        which = " (its first interleaved round)" if comparison is not None else ""
        return [f"Your loader's {mine.line}{which}."]
    if trial is not None:
        return [f"At num_workers={rec.num_workers}, the {trial.line}."]
    return []


def _whole_run(summary: LoopSummary | None) -> tuple[float | None, float]:
    """The user's loop's rate and waiting share over the whole run (the windows' medians where
    a summary has no whole-run figures)."""
    if summary is None:
        return None, 0.0
    rate_ = getattr(summary, "overall_samples_per_s", None)
    if rate_ is None and summary.samples_per_s is not None:
        rate_ = summary.samples_per_s.median
    waits = getattr(summary, "overall_wait_share", None)
    if waits is None:
        waits = summary.wait_share.median if summary.wait_share is not None else 0.0
    return rate_, waits

"""A loader diagnosed in the advisor's loop, and two loaders compared in it
(`advisor.diagnosis.loop`), as people read them: one figure a line, spreads in brackets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.core.readable import lines_for
from advisor.core.units import binary_size, per_s
from advisor.report.watch import findings

if TYPE_CHECKING:
    from advisor.decide.judge import JudgedLoop
    from advisor.decide.judged import Comparison
    from advisor.measure.loop.results import Spread


@lines_for("advisor.decide.judge.JudgedLoop")
def diagnosis_lines(diagnosis: JudgedLoop) -> list[str]:
    """A judged loop as a person reads it: the verdict, the bottleneck, the change and what
    else was found, then one figure a line, spreads in brackets."""
    s = diagnosis.summary
    unjudged = "too few steps to judge yet" if s.batches > 1 else "one batch only: nothing to judge"
    out = [diagnosis.verdict.line if diagnosis.verdict else unjudged]
    if diagnosis.bottleneck is not None:
        out.append(diagnosis.bottleneck.line)
    out += findings(diagnosis)
    rate = s.overall_samples_per_s
    windows = f" (windows {_spread(s.samples_per_s, per_s)})" if s.samples_per_s else ""
    out.append(
        "samples/s in the loop: " + ("not measured" if rate is None else per_s(rate)) + windows
    )
    out.append(f"wait per batch: {_spread(s.wait_per_batch_s, _seconds)}")
    out.append(f"step per batch: {_spread(s.step_s, _seconds)}")
    out.append(f"first batch after: {_seconds(s.time_to_first_batch_s)}")
    if s.headspace_samples_per_s is not None:  # replayed by `diagnose`, not by `watch`
        out.append(
            f"with loading free (headspace): {_spread(s.headspace_samples_per_s, per_s)} samples/s"
        )
    cpu = s.loader_cpu_s_per_sample
    out.append("loader CPU per sample: " + ("not measured" if cpu is None else _seconds(cpu)))
    out.append(f"peak memory of the loader's processes: {binary_size(s.peak_rss_bytes)}")
    if s.gpu_utilization is not None:
        out.append(f"GPU utilisation: {_spread(s.gpu_utilization, lambda u: f'{u:.0f}%')}")
    out.append(
        f"{s.batches} batches, {s.samples:,} samples in {_seconds(s.seconds)} "
        f"(ended: {_ENDED[s.ended]})"
    )
    return out + list(s.notes)


def comparison_headline(comparison: Comparison, change: str = "") -> str:
    """ "num_workers 0 -> 2: 31 -> 130 samples/s (4.2x, 3.9-4.5x over the rounds), data wait
    78% -> 3% of each step"; without `change` it starts at the rates."""
    rates = (
        comparison.pooled("before", "overall_samples_per_s"),
        comparison.pooled("after", "overall_samples_per_s"),
    )
    waits = (
        comparison.pooled("before", "overall_wait_share"),
        comparison.pooled("after", "overall_wait_share"),
    )
    before, after = (r.median if r else 0.0 for r in rates)
    wait_b, wait_a = (w.median if w else 0.0 for w in waits)
    speedup = comparison.speedup
    ratio = ""
    if speedup is not None:
        ratio = f" ({speedup.median:.2f}x"
        ratio += f", {speedup.low:.2f}-{speedup.high:.2f}x)" if speedup.n > 1 else ")"
    text = (
        f"{per_s(before)} -> {per_s(after)} samples/s{ratio}, data wait "
        f"{wait_b * 100:.0f}% -> {wait_a * 100:.0f}% of each step"
    )
    return f"{change}: {text}" if change else text


@lines_for("advisor.decide.judged.Comparison")
def comparison_lines(comparison: Comparison, change: str = "") -> list[str]:
    """The comparison's headline (`comparison_headline`), then each loader's verdict on the
    median of its rounds."""
    lines = [comparison_headline(comparison, change)]
    before, after = comparison.verdicts()
    if before is not None and after is not None:
        lines.append(f"before: {before.line}")
        lines.append(f"after: {after.line}")
    return lines


def comparison_dict(comparison: Comparison) -> dict[str, Any]:
    """The comparison's facts (`to_dict`) with its headline last, as its JSON has it."""
    return {**comparison.to_dict(), "headline": comparison_headline(comparison)}


_ENDED = {
    "batches": "batch limit",
    "seconds": "time limit",
    "epoch": "the loader ran out",
    "cancelled": "cancelled",
    "running": "still running",
    "stopped": "the loop stopped",
    "error": "the loop raised",
}


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value * 1e3:.1f} ms" if value >= 1e-3 else f"{value * 1e6:.0f} µs"


def _spread(spread: Spread | None, fmt: Callable[[float], str]) -> str:
    if spread is None:
        return "not measured"
    if spread.n < 2:
        return fmt(spread.median)
    return f"{fmt(spread.median)} ({fmt(spread.low)}-{fmt(spread.high)})"

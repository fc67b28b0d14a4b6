"""The plan check's bars, a share's result judged against them, and what `python -m bench
plan-check` prints and writes of the results: the Markdown tables and the summary line."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench.loader_sweep import Runs
from bench.plan_check_plans import Plan

SCORE_BAR = 0.90  # the planned count's median over the best count's, each step model
RATE_BAR = 0.15  # |predicted / measured - 1| at the planned count, each step model


@dataclass(frozen=True)
class ShareResult:
    scenario: str
    share: float
    consumer_rate: float
    plan: Plan | None
    error: str | None = None  # why there is no plan (the recommend command's failure)
    runs: Runs = field(default_factory=dict)  # step model -> count -> samples/s per run
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    score_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    best: dict[str, int] = field(default_factory=dict)
    # per step model at the planned count: the median and range of its runs, and the
    # prediction's error against the median (and against the runs' extremes)
    measured: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    rate_errors: dict[str, float] = field(default_factory=dict)
    rate_error_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before the trials, after
    # per step model at the planned count, medians over its runs: the cores the S3 server and
    # its proxy used, and the cores busy with anything (every core's /proc/stat)
    server_cores: dict[str, float] = field(default_factory=dict)
    busy_cores: dict[str, float] = field(default_factory=dict)

    @property
    def score_passed(self) -> bool:
        return self.score is not None and self.score >= SCORE_BAR

    @property
    def rate_verdicts(self) -> dict[str, bool]:
        """Per step model: the prediction within RATE_BAR of the planned count's median."""
        return {mode: abs(e) <= RATE_BAR for mode, e in self.rate_errors.items()}

    @property
    def rate_passed(self) -> bool:
        return bool(self.rate_errors) and all(self.rate_verdicts.values())


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _cores_used(r: ShareResult, mode: str) -> str:
    if mode not in r.server_cores:
        return ""
    return f" [server {r.server_cores[mode]:.2f}, busy {r.busy_cores[mode]:.2f} cores]"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def tables(results: list[ShareResult], cores: int) -> str:
    """The result table and what each plan was built from, as Markdown."""
    head = [
        f"| scenario | share | planned (decided by) | best within {cores} cores (per step) "
        "| score (per step, range) | predicted vs measured at the planned count "
        "(error, range) [the S3 server's and the busy cores then] | bar: score; rate per step |",
        "|---|---|---|---|---|---|---|",
    ]
    built = [
        "| scenario | share | trial on the share: median (range) | model inputs (ms/sample) "
        "| the model's curve vs the sweep's median (sleep), per count |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        share = f"{r.share:g} core"
        if r.plan is None:
            head.append(f"| {r.scenario} | {share} | failed: {r.error} | | | | no; no |")
            continue
        p = r.plan
        rules = ", ".join(p.decided_by) or "-"
        best = ", ".join(f"{m} {w}" for m, w in r.best.items())
        scores = "; ".join(
            f"{m} {r.scores[m]:.2f} ({lo:.2f}-{hi:.2f})" for m, (lo, hi) in r.score_ranges.items()
        )
        rates = "; ".join(
            f"{m} {_rate(min(p.predicted_for(m), r.consumer_rate))} vs {_rate(med)} "
            f"({_rate(lo)}-{_rate(hi)}), {r.rate_errors[m]:+.0%} "
            f"({r.rate_error_ranges[m][0]:+.0%} to {r.rate_error_ranges[m][1]:+.0%})"
            + _cores_used(r, m)
            for m, (med, lo, hi) in r.measured.items()
        )
        verdicts = ", ".join(f"{m} {'yes' if ok else 'no'}" for m, ok in r.rate_verdicts.items())
        bar = f"{'yes' if r.score_passed else 'no'}; {verdicts}"
        head.append(
            f"| {r.scenario} | {share} | {p.planned} ({rules}; {p.data_source}) | {best} "
            f"| **{r.score:.2f}**: {scores} | {rates} | {bar} |"
        )
        trial = ", ".join(
            f"{w}: {_rate(m)} ({_rate(lo)}-{_rate(hi)})"
            for w, (m, lo, hi) in p.trial_counts.items()
        )
        inputs = p.model_inputs
        per = "; ".join(
            f"{w}: main {_ms(c['main_ms'])}, machine {_ms(c['machine_ms'])}, worker "
            f"{_ms(c['worker_ms'])}"
            for w, c in inputs["per_count"].items()
        )
        first = "sleep" if "sleep" in r.runs else next(iter(r.runs), "")
        curve = ", ".join(
            f"{w}: {_rate(rate)} vs {_rate(statistics.median(r.runs[first][w]))} "
            f"({rate / statistics.median(r.runs[first][w]) - 1:+.0%})"
            for w, rate in p.predicted_curve.items()
            if r.runs.get(first, {}).get(w) and statistics.median(r.runs[first][w]) > 0
        )
        built.append(
            f"| {r.scenario} | {share} | {trial} | CPU {_ms(inputs['cpu_ms_per_sample'])}, "
            f"overhead {_ms(inputs['overhead_ms_per_sample'])}; {per} | {curve or '-'} |"
        )
    return "\n".join([*head, "", *built])


def summary(results: list[ShareResult], seconds: float) -> str:
    planned = [r for r in results if r.plan is not None]
    scores = [r.score for r in planned if r.score is not None]
    errors = [abs(e) for r in planned for e in r.rate_errors.values()]
    if not scores:
        return f"no plan was made ({seconds:.0f} s)"
    per_step = {
        mode: sum(r.rate_verdicts.get(mode, False) for r in planned)
        for mode in dict.fromkeys(m for r in planned for m in r.rate_verdicts)
    }
    steps = ", ".join(f"{n} with a {mode} step" for mode, n in per_step.items())
    return (
        f"bar: {sum(r.score_passed for r in planned)} of {len(results)} plans score >= "
        f"{SCORE_BAR:.2f} (min {min(scores):.2f}); {sum(r.rate_passed for r in planned)} of "
        f"{len(results)} predict the planned count's rate within {RATE_BAR:.0%} with every step "
        f"model ({steps}; median |error| {statistics.median(errors):.0%}, largest "
        f"{max(errors):.0%}); {seconds:.0f} s"
    )

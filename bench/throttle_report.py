"""What one run of `python -m bench throttle` measured, its runs summarised per case (medians with
the range over the repeats, the plan beside them) and the Markdown table of that summary."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Run:
    """One run of one layout against one limit (GET/s; bench.throttle.UNLIMITED to calibrate)."""

    layout: str
    mode: str  # "calibrate", "adaptive" or "fixed"
    prefixes: int
    per_object: int  # samples per object: 1, or a tar shard's
    limit: float  # per prefix
    ok_per_s: float  # successful GETs per second over the window
    share_of_limit: float  # ok_per_s / limit (0 for the calibration)
    requests_per_success: float
    throttled: int
    onset_s: float | None  # first GET to first 503
    rank_share_min: float  # a rank's share of the items read, the least and the most
    rank_share_max: float
    items: int
    samples_per_s: float  # samples the ranks read per second over the window
    wrong: int
    errors: list[str]
    planned_ok_per_s: float | None = None  # the plan's successful GET/s (its range's middle)
    planned_throttled: bool | None = None


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for key in dict.fromkeys((r.layout, r.prefixes, r.per_object, r.mode) for r in runs):
        group = [r for r in runs if (r.layout, r.prefixes, r.per_object, r.mode) == key]
        onsets = [r.onset_s for r in group if r.onset_s is not None]
        planned = [(r, r.planned_ok_per_s) for r in group if r.planned_ok_per_s]
        rows.append(
            {
                "layout": key[0],
                "prefixes": key[1],
                "per_object": key[2],
                "mode": key[3],
                "runs": len(group),
                "limit": _spread([r.limit for r in group]) if key[3] != "calibrate" else None,
                "ok_per_s": _spread([r.ok_per_s for r in group]),
                "share_of_limit": _spread([r.share_of_limit for r in group]),
                "requests_per_success": _spread([r.requests_per_success for r in group]),
                "onset_s": _spread(onsets) if onsets else None,
                "rank_share": [
                    min(r.rank_share_min for r in group),
                    max(r.rank_share_max for r in group),
                ],
                "wrong": sum(r.wrong for r in group),
                "errors": sum(len(r.errors) for r in group),
                # the plan beside it: throttled as planned, and measured / planned ok GET/s
                "planned_throttled": [r.planned_throttled for r, _ in planned],
                "throttled_runs": sum(r.throttled > 0 for r in group),
                "plan_ratio": _spread([r.ok_per_s / p for r, p in planned]) if planned else None,
            }
        )
    return rows


def _cell(spread: dict[str, float] | None, fmt: str) -> str:
    if spread is None:
        return "-"
    return f"{spread['median']:{fmt}} ({spread['min']:{fmt}}-{spread['max']:{fmt}})"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| layout | prefixes | samples/object | reader | limit GET/s per prefix | ok GET/s "
        "| share of limit "
        "| requests/success | onset s | plan: throttled? | runs throttled | measured / plan "
        "| rank share | wrong | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lo, hi = row["rank_share"]
        planned = row["planned_throttled"]
        plan = (
            "-"
            if not planned
            else ("yes" if all(planned) else "no" if not any(planned) else "mixed")
        )
        lines.append(
            f"| {row['layout']} | {row['prefixes']} | {row['per_object']} | {row['mode']} "
            f"| {_cell(row['limit'], '.0f')} "
            f"| {_cell(row['ok_per_s'], '.0f')} | {_cell(row['share_of_limit'], '.2f')} "
            f"| {_cell(row['requests_per_success'], '.2f')} | {_cell(row['onset_s'], '.2f')} "
            f"| {plan} | {row['throttled_runs']} of {row['runs']} "
            f"| {_cell(row['plan_ratio'], '.2f')} "
            f"| {lo:.2f}-{hi:.2f} | {row['wrong']} | {row['errors']} |"
        )
    return "\n".join(lines)

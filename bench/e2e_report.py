"""Statistics, bars and the table of `python -m bench e2e` (pure functions of the measured runs)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from advisor.measure.loop.results import Spread

# A run's measured quantities as the table shows them: (key, column title, format)
METRICS: tuple[tuple[str, str, str], ...] = (
    ("samples_per_s", "samples/s (epoch)", "{:,.0f}"),
    ("steady_samples_per_s", "samples/s after 1st batch", "{:,.0f}"),
    ("first_batch_s", "first batch s", "{:.2f}"),
    ("epoch_s", "epoch s", "{:.1f}"),
    ("later_samples_per_s", "samples/s (later epochs)", "{:,.0f}"),
    ("peak_rss_mb", "peak RSS MB", "{:,.0f}"),
    ("cpu_ms_per_sample", "CPU ms/sample", "{:.3g}"),
    ("server_cpu_s", "server CPU s", "{:.1f}"),
)


def derived(raw: dict[str, Any]) -> dict[str, float]:
    """A run's metrics from what the run and its RSS sampler reported.

    samples/s is the samples over the epoch time, start-up included: what the fixed number of
    samples cost. The rate after the first batch leaves start-up out (it is the whole epoch when
    the run had one batch); where a worker's first batch waits for a whole object (a text
    shard), it also leaves out that object's transfer, so the bars are judged on the epoch.
    The later epochs' rate is the median over the run's epochs after the first (NaN with none):
    the exported loader reads its cache or local copy there, the peers S3 again."""
    samples, epoch, first = raw["samples"], raw["epoch_s"], raw["first_batch_s"]
    after = samples - raw.get("first_batch_samples", 0)
    steady = after / (epoch - first) if after > 0 and epoch > first else samples / epoch
    later = [samples / s for s in raw.get("later_epoch_s", ()) if s > 0]
    return {
        "samples_per_s": samples / epoch,
        "steady_samples_per_s": steady,
        "first_batch_s": first,
        "epoch_s": epoch,
        "later_samples_per_s": statistics.median(later) if later else float("nan"),
        "peak_rss_mb": raw["peak_rss_mb"],
        "cpu_ms_per_sample": raw["cpu_s"] / samples * 1e3,
        "server_cpu_s": raw.get("server_cpu_s", float("nan")),
    }


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> Spread:
    """ours/theirs per repetition (runs of one repetition are neighbours in time), summarised."""
    return Spread.over([a / b for a, b in zip(ours, theirs, strict=False) if b > 0])


@dataclass(frozen=True)
class Bar:
    name: str
    ratio: Spread
    wanted: float
    against: str

    @property
    def met(self) -> bool:
        return not math.isnan(self.ratio.median) and self.ratio.median >= self.wanted


def bar(name: str, rates: dict[str, list[float]], ours: str, theirs: list[str], want: float) -> Bar:
    """`ours` against the best of `theirs` (by median samples/s), as per-repetition ratios."""
    present = [t for t in theirs if rates.get(t)]
    if ours not in rates or not present:
        return Bar(name, Spread.over([]), want, "not measured")
    best = max(present, key=lambda t: statistics.median(rates[t]))
    return Bar(name, paired_ratio(rates[ours], rates[best]), want, best)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per (scenario, loader) with each metric's median (range)."""
    head = ["scenario", "loader", "workers", *(title for _, title, _ in METRICS), "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        if row.get("skipped"):
            cells = [row["scenario"], row["loader"], "-", f"skipped: {row['skipped']}"]
            cells += [""] * (len(head) - len(cells))
        else:
            cells = [row["scenario"], row["loader"], str(row["workers"])]
            cells += [Spread(**row[key]).show(fmt) for key, _, fmt in METRICS]
            cells.append(str(row["runs"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bars_table(bars: list[Bar]) -> str:
    lines = ["| bar | measured (range) | wanted | result | against |", "|---|---|---|---|---|"]
    for b in bars:
        verdict = "MET" if b.met else "MISSED"
        lines.append(
            f"| {b.name} | {b.ratio.show('{:.2f}')} | >= {b.wanted:g} | {verdict} | {b.against} |"
        )
    return "\n".join(lines)


def _rates(rows: list[dict[str, Any]], scenario: str, key: str) -> dict[str, list[float]]:
    """`key` per loader of one scenario, indexed by repetition (NaN where a run failed)."""
    out: dict[str, list[float]] = {}
    for row in rows:
        if row["scenario"] == scenario and row["raw"]:
            by_rep = {r["rep"]: r[key] for r in row["raw"]}
            out[row["loader"]] = [by_rep.get(i, float("nan")) for i in range(max(by_rep) + 1)]
    return out


def bars(rows: list[dict[str, Any]], key: str = "samples_per_s") -> list[Bar]:
    """The issue's bars on `key` (samples/s over the epoch; the steady rate for reference)."""
    jpeg = _rates(rows, "20ms jpeg fast", key)
    jpeg0 = _rates(rows, "0ms jpeg fast", key)
    peers = [lab for lab in jpeg if not lab.startswith("exported")]
    peers0 = [lab for lab in jpeg0 if not lab.startswith("exported")]
    text = _rates(rows, "20ms text fast", key)
    tag = TAGS[key]
    images = [
        bar(f"20 ms jpeg fast: exported / boto3 tutorial w0{tag}", jpeg, "exported",
            ["boto3 w0"], 3.0),
        bar(f"20 ms jpeg fast: exported / best peer{tag}", jpeg, "exported", peers, 1.3),
        bar(f"0 ms jpeg fast: exported / best peer{tag}", jpeg0, "exported", peers0, 1.3),
    ]  # fmt: skip
    if key == "later_samples_per_s":
        return images  # a text run reads its shards once
    text_bar = bar(
        f"20 ms text: native w4 / fsspec w4{tag}", text, "lines-native w4", ["lines-fsspec w4"], 1.6
    )
    return [*images, text_bar]


# The bars are judged on the first epoch; the others are shown beside them.
TAGS = {
    "samples_per_s": "",
    "steady_samples_per_s": " (after 1st batch)",
    "later_samples_per_s": " (later epochs)",
}

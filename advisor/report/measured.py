"""What the trial measured beyond its rows: the storage probe by requests at once (as a terminal
shows it under the rows, `python -m advisor trial`), and what training saw per num_workers as a
table, a header row first, which the CLI prints as text columns and the wizard as an HTML
table."""

from __future__ import annotations

from advisor.core.units import counted, data_size, duration, mb_per_s, per_s, rate
from advisor.measure.trial.results import TrialResult
from advisor.report.rows import text_columns

# the step model a count's figures come from, in a word for the table
STEP_KINDS = {"none": "none", "sleep": "blocking", "spin": "spinning"}


def count_rows(trial: TrialResult, *, records: bool) -> list[tuple[str, ...]]:
    """Per count the slower step model's median and its spread (a text set is read record by
    record: its samples are records), the step, the slices, the workers' memory and the first
    batch; a header row first, none at all where no count was measured."""
    if not trial.counts:
        return []
    unit = "records/s" if records else "samples/s"
    rows: list[tuple[str, ...]] = [
        ("num_workers", f"{unit} (median, spread)", "the step", "slices", "worker RSS",
         "first batch"),
    ]  # fmt: skip
    rss = {p.num_workers: p.peak_worker_rss_bytes for p in trial.sweep}
    for c in trial.counts:
        bound = ">=" if c.lower_bound else ""  # no steady state: a lower bound (see notes)
        first = trial.first_batch_s(c.num_workers)
        rows.append(
            (
                str(c.num_workers),
                f"{bound}{per_s(c.median)} ({per_s(c.low)}-{per_s(c.high)})",
                STEP_KINDS.get(c.step, c.step),
                str(c.slower.slices),
                data_size(rss.get(c.num_workers, 0)),
                duration(first) if first is not None else "-",
            )
        )
    return rows


def measured_lines(trial: TrialResult, *, on_s3: bool, records: bool) -> list[str]:
    """The storage probe by requests at once (a folder is read, not requested: its words say
    files and reads), then the per-count table (`count_rows`) as text columns."""
    lines = []
    if trial.storage:
        s = trial.storage
        one, asked = ("one connection", "request") if on_s3 else ("one read at a time", "read")
        lines.append(f"storage, {one}: {mb_per_s(s.per_connection_mb_s)}")
        for level, mb_s, ops in s.concurrency_curve:
            at_once = counted(level, asked)
            what = "objects" if on_s3 else "files"
            lines.append(f"  {at_once:>12} at once  {mb_per_s(mb_s):>12}  {rate(ops, what):>16}")
    table = count_rows(trial, records=records)
    if table:
        lines += text_columns(table).splitlines()
    return lines

"""What the trial measured, as a terminal shows it under its rows (`python -m advisor trial`):
the storage probe by requests at once, and what training saw per num_workers."""

from __future__ import annotations

from advisor.core.units import counted, data_size, duration, mb_per_s, per_s, rate
from advisor.measure.trial.results import TrialResult

# the step model a count's figures come from, in a word for the table
STEP_KINDS = {"none": "none", "sleep": "blocking", "spin": "spinning"}


def measured_lines(trial: TrialResult, *, on_s3: bool, records: bool) -> list[str]:
    """The storage probe by requests at once (a folder is read, not requested: its words say
    files and reads), then per count the slower step model's median and its spread (a text
    set is read record by record: its samples are records)."""
    lines = []
    if trial.storage:
        s = trial.storage
        one, asked = ("one connection", "request") if on_s3 else ("one read at a time", "read")
        lines.append(f"storage, {one}: {mb_per_s(s.per_connection_mb_s)}")
        for level, mb_s, ops in s.concurrency_curve:
            at_once = counted(level, asked)
            what = "objects" if on_s3 else "files"
            lines.append(f"  {at_once:>12} at once  {mb_per_s(mb_s):>12}  {rate(ops, what):>16}")
    if trial.counts:
        unit = "records/s" if records else "samples/s"
        lines.append(
            f"num_workers  {unit} (median, spread)    the step  slices  worker RSS  first batch"
        )
        rss = {p.num_workers: p.peak_worker_rss_bytes for p in trial.sweep}
        for c in trial.counts:
            bound = ">=" if c.lower_bound else ""  # no steady state: a lower bound (see notes)
            spread = f"({per_s(c.low)}-{per_s(c.high)})"
            memory = data_size(rss.get(c.num_workers, 0))
            first = trial.first_batch_s(c.num_workers)
            lines.append(
                f"{c.num_workers:>11}  {bound:>2}{per_s(c.median):>7} {spread:<19}  "
                f"{STEP_KINDS.get(c.step, c.step):>8}  {c.slower.slices:>6}  "
                f"{memory:>10}  "
                f"{duration(first) if first is not None else '-':>11}"
            )
    return lines

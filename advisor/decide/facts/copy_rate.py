"""The rate a copy of the set to local disk runs at: one figure for one copy.

The most direct measurement wins: the set's own copy as its prepare() ran (the last sync that
fetched it, `native_loader.local_copy.CopyReport`), else the trial's timed copy of a sample,
else the storage probe's read rate (estimated), else File mode's typical rate (assumed). Every
front shows this figure and every plan multiplies it (`Context.copy_rate`, `copy_seconds`).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core.units import MB, data_rate, data_size, duration
from advisor.decide.thresholds import FILE_MODE_MB_S
from advisor.measure.trial.results import TrialResult
from native_loader.local_copy import CopyReport


@dataclass(frozen=True)
class CopyRate:
    """Bytes/s a copy of the set to local disk runs at, and where the number comes from:
    "measured" (the set's own copy, as its prepare() ran, else the trial's timed copy of a
    sample), "estimated" (from the storage probe's read rate: nothing copied) or "assumed"
    (File mode's typical rate: nothing measured). `words` say it in a rationale: "the measured
    33 MiB/s (the trial copied 48 MiB in 1.4 s)"."""

    bytes_per_s: float
    basis: str
    words: str


def copy_rate(made: CopyReport | None, trial: TrialResult | None) -> CopyRate:
    """How fast a copy of the set to local disk runs: as the set's own copy ran (`made`: its
    prepare()), else as the trial's copy of a sample ran, else as its storage probe read, else
    File mode's typical ~200 MB/s (assumed). A sync that fetched less than the trial copied (a
    few changed objects) measured less of the copy than the trial did."""
    timed = trial.sample_copy if trial is not None else None
    least = timed.bytes if timed is not None and timed.bytes_per_s > 0 else 0
    if made is not None and made.bytes_per_s > 0 and made.copied_bytes >= least:
        rate = made.bytes_per_s
        how = f"{data_size(made.copied_bytes)} in {duration(made.seconds)}"
        return CopyRate(
            rate, "measured", f"the measured {data_rate(rate)} (its prepare() copied {how})"
        )
    if timed is not None and timed.bytes_per_s > 0:
        rate = timed.bytes_per_s
        how = f"{data_size(timed.bytes)} of it in {duration(timed.seconds)}"
        return CopyRate(
            rate, "measured", f"the measured {data_rate(rate)} (the trial copied {how})"
        )
    probe = trial.storage if trial is not None else None
    if probe is not None and probe.best_mb_s > 0:
        rate = probe.best_mb_s * MB
        return CopyRate(
            rate, "estimated",
            f"about {data_rate(rate)}, estimated from the read rate the trial measured "
            "(it timed no copy)",
        )  # fmt: skip
    rate = FILE_MODE_MB_S * MB
    return CopyRate(
        rate, "assumed", f"about {data_rate(rate)}, assumed (File mode's typical rate; no trial)"
    )

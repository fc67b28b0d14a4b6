"""The trial's measured table (`python -m advisor trial`): each count's worker memory is the
sweep's bytes, said in binary units."""

from __future__ import annotations

import dataclasses

from advisor.report.measured import measured_lines
from tests.builders import make_trial

MIB = 2**20


def test_each_counts_worker_memory_is_its_own_slices_bytes_in_binary_units() -> None:
    trial = make_trial({0: 200.0, 2: 470.0, 4: 900.0})
    rss = {0: 0, 2: 150 * MIB, 4: 1536 * MIB}  # no workers: no worker memory
    sweep = tuple(
        dataclasses.replace(p, peak_worker_rss_bytes=rss[p.num_workers]) for p in trial.sweep
    )
    lines = measured_lines(dataclasses.replace(trial, sweep=sweep), on_s3=True, records=False)
    header = next(i for i, line in enumerate(lines) if line.startswith("num_workers"))
    assert "worker RSS" in lines[header]
    rows = {int(line.split()[0]): line for line in lines[header + 1 :]}
    assert rows.keys() == {0, 2, 4}, lines
    assert "  0 B  " in rows[0] and "150 MiB" in rows[2] and "1.5 GiB" in rows[4], lines

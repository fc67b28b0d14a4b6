"""What a set of processes has used (`TreeSample`): the reading, and the counts made from it."""

from __future__ import annotations

import os
from pathlib import Path

from advisor.measure.hardware.host import process_usage
from advisor.measure.hardware.processes import ProcessReading, TreeSample


def test_a_process_that_ends_keeps_its_last_cpu_and_holds_no_memory() -> None:
    start = TreeSample({1: ProcessReading(1.0, 100), 2: ProcessReading(5.0, 300)})
    later = TreeSample({1: ProcessReading(1.5, 120), 3: ProcessReading(0.25, 50)})
    chained = start.then(later)
    assert chained.processes == {
        1: ProcessReading(1.5, 120),
        2: ProcessReading(5.0, 0),  # ended: its last CPU, no memory
        3: ProcessReading(0.25, 50),  # born since: counted from zero
    }
    assert chained.cpu_since(start) == 0.75
    assert later.cpu_since(start) == 0.75  # unchained, the ended one adds nothing either way
    assert chained.total_rss_bytes == 170 and chained.largest_rss_bytes == 120
    # a reading never takes CPU back (a later reading that is lower keeps the earlier one)
    assert later.then(TreeSample({1: ProcessReading(1.0, 90)})).processes[1].cpu_s == 1.5
    assert TreeSample().largest_rss_bytes == 0


def test_process_usage_reads_stat_and_statm_and_none_when_gone(tmp_path: Path) -> None:
    proc = tmp_path / "proc" / "7"
    proc.mkdir(parents=True)
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S", "1"] + ["0"] * 9 + [str(3 * ticks), str(ticks)]  # state ... utime stime
    (proc / "stat").write_text(f"7 (a b) c) {' '.join(fields)} 0 0\n")
    (proc / "statm").write_text("1000 250 10 1 0 100 0\n")
    assert process_usage(7, root=tmp_path) == (4.0, 250 * os.sysconf("SC_PAGE_SIZE"))
    (proc / "statm").unlink()  # a reading between the two files: its memory reads 0
    assert process_usage(7, root=tmp_path) == (4.0, 0)
    assert process_usage(8, root=tmp_path) is None
    assert TreeSample.read([7, 8], root=tmp_path).processes == {7: ProcessReading(4.0, 0)}

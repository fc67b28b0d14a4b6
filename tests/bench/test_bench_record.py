"""`bench.record`: the run record every benchmark writes; the headers of older result files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.record import HEADER_KEYS, begin, header_of, results_of


def test_write_puts_the_header_first_and_the_headline_atop_the_markdown(tmp_path: Path) -> None:
    run = begin("demo", ["--quick"])
    record = run.write(tmp_path / "r" / "demo.json", {"rows": [1, 2]}, markdown="| table |")
    data = json.loads((tmp_path / "r" / "demo.json").read_text())
    assert list(data) == [*HEADER_KEYS, "rows"]
    assert data["command"] == "python -m bench demo --quick" == record.command
    assert {"cpu", "cores", "mem_gib", "kernel", "versions", "load_before"} <= set(data["machine"])
    md = (tmp_path / "r" / "demo.md").read_text()
    assert md.startswith("`python -m bench demo --quick` on ") and md.endswith("| table |\n")
    assert header_of(data) == {k: data[k] for k in HEADER_KEYS}
    with pytest.raises(ValueError, match="header"):
        run.write(tmp_path / "x.json", {"command": "clash"})


def test_header_of_reads_the_records_each_benchmark_wrote_before() -> None:
    assert header_of([{"scenario": "a"}]) == dict.fromkeys(HEADER_KEYS)  # advisor, advisor-check
    assert results_of([{"scenario": "a"}]) == [{"scenario": "a"}]
    assert results_of({"command": "c", "results": [1]}) == [1]
    large = {"command": "c", "started": "2025-01-02T03:04:05+00:00", "load_before": [1.5, 1, 1],
             "load_after": [2.0, 1, 1], "rows": []}  # fmt: skip
    h = header_of(large)
    assert h["date"] == "2025-01-02T03:04:05+00:00"
    assert h["machine"] == {"load_before": 1.5, "load_after": 2.0}
    assert results_of(large) == {"started": large["started"], "load_before": [1.5, 1, 1],
                                 "load_after": [2.0, 1, 1], "rows": []}  # fmt: skip
    assert header_of({"command": "c", "machine": "host 2 CPUs"})["machine"] == {
        "description": "host 2 CPUs"
    }

"""What `print(result)` and a notebook show of each result a user holds: a diagnosis, a
comparison, a watched loop's report (the before/after's: tests/front/test_before_after.py).
Each is its report module's lines, a few of them, never the dataclass's repr; the notebook shows
the same lines, escaped."""

from __future__ import annotations

import html
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

import advisor
from advisor.core.bounds import LoopLimits
from advisor.core.readable import lines_html
from advisor.diagnosis import compare, diagnose
from advisor.report.diagnosis import comparison_lines, diagnosis_lines
from advisor.report.watch import watch_lines

SHORT = LoopLimits(max_batches=30, max_seconds=1.0, batch_timeout_s=5, first_batch_timeout_s=10)


class SlowBatches:
    """A re-iterable loader whose every batch of 8 samples takes `seconds` to load."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(1000):
            time.sleep(self.seconds)
            yield list(range(i, i + 8))


def _readable(result: Any, lines: list[str], most: int) -> None:
    """`str` is the lines; the notebook shows each of them escaped, and no repr."""
    text = str(result)
    assert text == "\n".join(lines)
    assert 2 <= len(text.splitlines()) <= most, text
    assert f"{type(result).__name__}(" not in text
    shown = result._repr_html_()
    assert f"{type(result).__name__}(" not in shown
    assert all(html.escape(line) in shown for line in lines if line), shown
    assert len(shown) < 4000


def test_a_diagnosis_prints_its_lines() -> None:
    result = diagnose(SlowBatches(0.005), seconds_per_batch=0.005, limits=SHORT)
    _readable(result, diagnosis_lines(result), most=15)
    assert str(result).splitlines()[0] == result.verdict.line  # type: ignore[union-attr]


def test_a_comparison_prints_its_headline_and_verdicts() -> None:
    result = compare(
        SlowBatches(0.01), SlowBatches(0.0), seconds_per_batch=0.005, limits=SHORT, rounds=1
    )
    _readable(result, comparison_lines(result), most=3)
    before, after = str(result).splitlines()[1:]
    assert before.startswith("before: ") and after.startswith("after: ")


def test_a_watched_loops_report_prints_its_lines() -> None:
    watched = advisor.watch(DataLoader(TensorDataset(torch.arange(240)), batch_size=8), out=None)
    for _ in watched:
        time.sleep(0.002)
    report = watched.report()
    # one judged loop, one formatter: the watch's report prints as a diagnosis does, and
    # `watch` says its own lines (the judge's first, then the run) at the loop's end
    _readable(report, diagnosis_lines(report), most=15)
    said = watch_lines(report)
    assert said[-1].startswith("30 steps, ") and said[0] == str(report).splitlines()[0]


def test_the_notebook_lines_are_escaped() -> None:
    shown = lines_html(["a <b> & c", "", "d > e"])
    assert "<b> &" not in shown and "a &lt;b&gt; &amp; c" in shown and "d &gt; e" in shown
    assert shown.count("<li>") == 1  # the headline, then the lines below it; none empty


def test_a_result_prints_as_the_report_words_it_whoever_made_it() -> None:
    """Made by the diagnosis package alone, no report module imported: `str` still reads the
    report's lines (the package face names the import that registers them)."""
    code = (
        "import sys\n"
        "from advisor.diagnosis import diagnose\n"
        "assert 'advisor.report' not in sys.modules\n"
        "result = diagnose([[1, 2]] * 30, seconds_per_batch=0.001)\n"
        "print(result)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "Diagnosis(" not in done.stdout and "samples/s in the loop: " in done.stdout

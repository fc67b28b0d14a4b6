"""Issue #45's leftover words: what people read over test_wording's cases never leads a
decision with its rule ids ("[medium; SRC-2]") and never says a count "in flight", "the sleep
step" or "(spin step)": requests are "at once", steps "blocking" or "spinning". The re-shard
command's progress and estimate say rates in MiB/s, as every other line does."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from advisor.reshard import cli as reshard_cli
from tests.front.test_wording import CASES, raw_patterns, render

JARGON = {
    "a count in flight": re.compile(r"\b\d+ (?:requests? )?in flight\b"),
    "a step named for its mechanism": re.compile(r"\b(?:sleep|spin) step\b"),
    "a rule id before the words": re.compile(r"\[(?:low|medium|high); [A-Z]+-\d"),
}


def jargon(text: str) -> list[str]:
    return [
        f"{why}: {match.group(0)!r} in {line.strip()!r}"
        for line in text.splitlines()
        for why, pattern in JARGON.items()
        for match in pattern.finditer(line)
    ]


def test_the_patterns_catch_the_old_wording() -> None:
    old = (
        "so 8 in flight (twice that for jitter)\n"
        "4 requests in flight per process at 20 ms to first byte\n"
        "293 samples/s median (the sleep step the slower)\n"
        "[medium; SRC-2] data_source = stream\n"
    )
    assert len(jargon(old)) == 4


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_what_people_read_has_no_jargon(case: tuple) -> None:
    _, profile, hardware, workload, with_trial = case
    assert jargon(render(profile, hardware, workload, with_trial)) == []


def test_the_reshard_progress_says_rates_in_mib_per_s() -> None:
    class Event:
        kind, shards_done, shards_total, samples_per_s = "progress", 3, 10, 120.0
        mb_per_s, eta_s, retries, throttled, message, fraction = 52.4, 12.0, 0, 0, "", 0.3

    bar = reshard_cli._Bar(quiet=False, as_json=False)
    bar.tty = True
    out = io.StringIO()
    with contextlib.redirect_stderr(out):
        bar(Event())  # type: ignore[arg-type]
    assert "50 MiB/s" in out.getvalue() and raw_patterns(out.getvalue()) == []

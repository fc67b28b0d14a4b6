"""The workload and re-shard panels write counts, rates and durations through the one set of
formatters (`advisor.core.units`): no "(s)" plural, no raw number without its unit."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from advisor.core.workload import Workload
from advisor.reshard.progress import ReshardEvent
from advisor.wizard.panels.reshard import _info_html
from advisor.wizard.panels.workload import demand
from tests.wizard.conftest import WIDGET_WARNINGS

pytestmark = WIDGET_WARNINGS


def test_demand_counts_the_jobs_gpus_in_words() -> None:
    assert demand(Workload(consumer_rate=250.0, nodes=2, gpus_per_node=4)) == (
        "one GPU consumes 250 samples/s; the job (8 GPUs) 2,000 samples/s"
    )
    assert demand(Workload()) == (
        "rate unknown: the advisor aims for the loader's best throughput (1 GPU)"
    )


def test_reshard_progress_and_plan_read_with_units() -> None:
    estimate = SimpleNamespace(
        shards=1, samples=12_000, seconds=250.0, get_requests=12_000, put_requests=3,
        list_requests=1, request_cost_usd=0.0048,
    )  # fmt: skip
    event = ReshardEvent(
        "progress", "", shards_done=3, shards_total=10, samples_per_s=1234.5, mb_per_s=2180.4,
        eta_s=75.0, retries=1,
    )  # fmt: skip
    step: Any = SimpleNamespace(estimate=estimate, last_event=event, before=None, after=None)
    text = _info_html(step)
    assert "plan: 1 shard, 12,000 samples; about 4 min 10 s, 12,004 requests" in text
    assert "3/10 shards, 1,234 samples/s, 2,079 MiB/s, 1 min 15 s left, 1 retry" in text


def test_a_long_uri_in_the_history_is_one_line_whole_in_its_title() -> None:
    """The history table wrapped a long URI over four lines: its middle is cut, the whole URI
    in the title; short cells and words are as they were."""
    from advisor.wizard.panels.base import URI_CHARS, cell_html, rows_html

    uri = "s3://loader-advisor-demo-bucket/small-images/train/"
    shown = cell_html(uri)
    assert f"title='{uri}'" in shown and "s3://loader-adv\u2026l-images/train/<" in shown
    visible = shown.split(">", 1)[1].split("<", 1)[0]
    assert len(visible) == URI_CHARS - 1 and "la-uri" in shown
    assert cell_html("s3://b/x/") == "s3://b/x/"
    words = "the folder, read in place and not copied anywhere at all"
    assert cell_html(words) == words
    table = rows_html([("#", "data set"), ("#1", uri)], "la-history-trials")
    assert f"title='{uri}'" in table and f">{uri}<" not in table


def test_backticks_are_code_in_the_wizard(wizard: Any) -> None:
    """A status or an error quoting a command shows it as code, not between backticks."""
    c = wizard.controller
    c.report("the demo kept 241 MiB (`python -m advisor cache` lists it)")
    assert "<code>python -m advisor cache</code> lists it" in wizard.status.value
    assert "`" not in wizard.status.value
    c.set_error("dataset", "run `make lab` <first>")
    assert "run <code>make lab</code> &lt;first&gt;" in wizard.error.value

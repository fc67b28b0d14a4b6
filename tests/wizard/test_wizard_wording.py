"""The workload and re-shard panels write counts, rates and durations through the one set of
formatters (`advisor.core.units`): no "(s)" plural, no raw number without its unit."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from advisor.core.workload import Workload
from advisor.reshard.progress import ReshardEvent
from advisor.wizard.panels.reshard import _info_html
from advisor.wizard.panels.workload import demand


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

"""The live trial on real data over real HTTP: bounded, cancellable, JSON-serializable."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time

import pytest

from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.hardware import probe_hardware
from advisor.location import DatasetLocation
from advisor.model import INFLIGHT_MAX
from advisor.profile import profile_dataset
from advisor.trial import TrialEvent, _saturated, child_pids, run_trial
from advisor.workload import Workload
from native_loader import S3Reader

SPEC = DemoSpec(images=80, image_kb=(20, 40), classes=2, shard_mb=0.5, large_files=1, large_mb=2)


@pytest.fixture(scope="module")
def demo(s3_endpoint: S3Endpoint) -> str:
    bucket = "trial-demo"
    upload(s3_endpoint, bucket, SPEC)
    return bucket


def _setup(endpoint: S3Endpoint, uri: str) -> tuple[DatasetLocation, object]:
    location = DatasetLocation(uri, endpoint_url=endpoint.url)
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    return location, profile


def test_saturation_rule() -> None:
    assert not _saturated([10, 20])
    assert not _saturated([10, 20, 40])
    assert _saturated([10, 20, 21, 20.5])
    assert not _saturated([10, 10.5, 30])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("layout", ["small-images", "shards"])
def test_trial_measures_everything_within_budget(
    s3_endpoint: S3Endpoint, demo: str, layout: str
) -> None:
    location, profile = _setup(s3_endpoint, f"s3://{demo}/{layout}/")
    events: list[TrialEvent] = []
    started = time.monotonic()
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=8),  # type: ignore[arg-type]
        seconds=8, progress=events.append,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed < 8 * 2.5, elapsed  # the budget bounds it (plus worker start-up)
    assert result.storage is not None and result.storage.first_byte_p50_s > 0
    assert result.storage.concurrency_curve
    # the sweep read with Little's law's requests in flight for the measured latency
    assert result.requests_in_flight is not None and 32 <= result.requests_in_flight <= INFLIGHT_MAX
    assert result.decode is not None and result.decode.cpu_s_per_sample > 0
    workers = [p.num_workers for p in result.sweep]
    assert workers[:2] == [0, 1]
    assert all(p.samples_per_s > 0 and p.samples > 0 for p in result.sweep)
    # the main thread's loading work per sample: some CPU, never more than a sample's wall time
    zero = result.sweep[0]
    assert zero.main_cpu_s_per_sample is not None
    assert 0 < zero.main_cpu_s_per_sample <= 1.1 / zero.samples_per_s
    assert not any(p.pin_memory for p in result.sweep)  # no CUDA here
    assert any(p.point is not None for p in events) and events[-1].phase == "done"
    assert json.loads(json.dumps(dataclasses.asdict(result)))["uri"] == location.uri


@pytest.mark.timeout(60)
def test_cancel_returns_promptly_and_leaves_no_workers(s3_endpoint: S3Endpoint, demo: str) -> None:
    location, profile = _setup(s3_endpoint, f"s3://{demo}/small-images/")
    cancel = threading.Event()

    def on_event(event: TrialEvent) -> None:
        if event.phase == "sweep":
            cancel.set()

    before = child_pids()
    started = time.monotonic()
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=4),  # type: ignore[arg-type]
        seconds=60, progress=on_event, cancel=cancel,
    )  # fmt: skip
    assert result.cancelled
    assert time.monotonic() - started < 30
    assert result.storage is not None
    deadline = time.monotonic() + 10
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "DataLoader workers left running"


def test_bad_budget_and_transform(s3_endpoint: S3Endpoint, demo: str) -> None:
    location, profile = _setup(s3_endpoint, f"s3://{demo}/large/")
    hardware = probe_hardware()
    with pytest.raises(ValueError, match="seconds"):
        run_trial(location, profile, hardware, Workload(), seconds=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot import"):
        run_trial(
            location, profile, hardware, Workload(transform="no_such_module_x:fn"),  # type: ignore[arg-type]
            seconds=5,
        )  # fmt: skip
    assert os.cpu_count()

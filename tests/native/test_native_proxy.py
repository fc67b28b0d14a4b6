"""The reader through the fault-injecting proxy (`testing.FaultProxy`) in front of SeaweedFS.

Each fault hits real SigV4-signed traffic; the bytes read must still equal what boto3 wrote.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from advisor.demo.proxy import NetworkProfile
from advisor.demo.server import S3Endpoint
from native_loader import S3Error
from testing import Faults, When
from tests.native.conftest import PART, through_proxy

# every test here times a delay, a rate or a stall: `make test` runs them alone
pytestmark = pytest.mark.timing


def test_slow_down_is_retried(s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str) -> None:
    data = os.urandom(5000)
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=data)
    faults = Faults(slow_down=When(requests=(1, 2)))
    with through_proxy(s3_endpoint, faults) as (reader, proxy):
        result = reader.read(f"s3://{s3_bucket}/k")
        assert bytes(result) == data
        assert result.attempts == 3
        assert proxy.stats().faults_injected == {"slow_down": 2}


def test_persistent_slow_down_gives_up_after_max_throttled_s(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")
    faults = Faults(slow_down=When(after_n=0))
    settings = {"max_attempts": 1, "max_throttled_s": 0.3}
    with through_proxy(s3_endpoint, faults, **settings) as (reader, proxy):
        with pytest.raises(S3Error, match="throttled by the endpoint") as info:
            reader.read(f"s3://{s3_bucket}/k")
        assert (info.value.code, info.value.status) == ("SlowDown", 503)
        # Throttles are not counted against max_attempts: it was asked again.
        assert proxy.stats().faults_injected["slow_down"] >= 2


@pytest.mark.parametrize(
    "faults",
    [
        Faults(reset=When(first_n=2)),
        Faults(truncate=When(every_n=3), truncate_at=0.3),
        Faults(reset_mid_body=When(every_n=4), reset_at=0.6),
    ],
    ids=["reset", "truncate", "reset_mid_body"],
)
def test_broken_transfers_are_retried(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, faults: Faults
) -> None:
    big = os.urandom(10 * PART + 5)
    small = {f"s/{i}": os.urandom(3000 + i) for i in range(12)}
    s3_client.put_object(Bucket=s3_bucket, Key="big", Body=big)
    for key, data in small.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    with through_proxy(s3_endpoint, faults) as (reader, proxy):
        assert bytes(reader.read(f"s3://{s3_bucket}/big")) == big
        got = [bytes(r) for r in reader.read_many(f"s3://{s3_bucket}/{k}" for k in small)]
        assert got == list(small.values())
        injected = sum(proxy.stats().faults_injected.values())
        assert injected >= 2
        assert reader.stats()["retries"] == injected


def test_stalled_body_is_aborted_and_retried(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    data = os.urandom(40_000)
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=data)
    faults = Faults(stall=When(first_n=1), stall_s=8, stall_at=0.5)
    start = time.monotonic()
    with through_proxy(s3_endpoint, faults, stall_timeout_s=0.5) as (reader, _):
        result = reader.read(f"s3://{s3_bucket}/k")
    assert bytes(result) == data
    assert result.attempts == 2
    assert time.monotonic() - start < 4


def test_slow_first_byte_is_aborted_and_retried(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"payload")
    faults = Faults(stall_head=When(first_n=1), stall_s=8)
    start = time.monotonic()
    with through_proxy(s3_endpoint, faults, first_byte_timeout_s=0.5) as (reader, _):
        result = reader.read(f"s3://{s3_bucket}/k")
    assert bytes(result) == b"payload"
    assert result.attempts == 2
    assert time.monotonic() - start < 4


def test_latency_is_hidden_by_concurrency(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    objects = {f"l/{i:02d}": os.urandom(2000) for i in range(40)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    network = NetworkProfile(latency_ms=50)
    with through_proxy(s3_endpoint, network=network, max_inflight_requests=16) as (reader, _):
        start = time.monotonic()
        got = [bytes(r) for r in reader.read_many(f"s3://{s3_bucket}/{k}" for k in objects)]
        elapsed = time.monotonic() - start
    assert got == list(objects.values())
    assert elapsed < 40 * 0.050 / 3, f"{elapsed:.2f} s: requests did not overlap"


def test_slow_first_byte_on_a_reused_connection(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"payload")
    faults = Faults(stall_head=When(requests=(3,)), stall_s=8)
    with through_proxy(s3_endpoint, faults, first_byte_timeout_s=0.5) as (reader, proxy):
        for _ in range(2):
            assert reader.read(f"s3://{s3_bucket}/k").attempts == 1
        start = time.monotonic()
        result = reader.read(f"s3://{s3_bucket}/k")
        assert time.monotonic() - start < 4
        assert result.attempts == 2
        assert reader.stats()["connections"] == 2  # the stalled one is dropped, not reused
        assert proxy.stats().faults_injected == {"stall_head": 1}


def test_many_stalled_parts_fail_once_and_leave_the_reader_usable(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    big = os.urandom(8 * PART)
    s3_client.put_object(Bucket=s3_bucket, Key="big", Body=big)
    s3_client.put_object(Bucket=s3_bucket, Key="small", Body=b"small")
    faults = Faults(stall=When(requests=range(2, 9)), stall_s=5, stall_at=0.1)
    with through_proxy(s3_endpoint, faults, max_attempts=1, stall_timeout_s=0.5) as (reader, _):
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="stalled"):
            reader.read(f"s3://{s3_bucket}/big")
        assert time.monotonic() - start < 3
        stats = reader.stats()
        assert (stats["active_requests"], stats["open_tickets"], stats["inflight_bytes"]) == (
            0,
            0,
            0,
        )
        assert bytes(reader.read(f"s3://{s3_bucket}/small")) == b"small"
        assert bytes(reader.read(f"s3://{s3_bucket}/big")) == big

"""The reader in a storm of 503 SlowDown: several processes read one prefix through the proxy's
emulated S3 rate limit (`advisor.demo.throttle.RateLimit`) in front of SeaweedFS, and keep it
near its allowed rate without multiplying requests; a short burst leaves nothing slow behind; a
storm that never ends fails with an error that says it was throttled and for how long.

The proxy counts what reached it (the oracle outside the reader); boto3 wrote the bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
import os
import time
from typing import Any

import pytest
from torch.utils.data import DataLoader

from advisor.demo.proxy import Proxy, RateLimit
from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ReaderConfig, S3Error, S3IterableDataset, S3Reader
from native_loader._client import shared_rate_limiter
from testing import FaultProxy, Faults, When

# every test here times a delay, a rate or a stall: `make test` runs them alone
pytestmark = pytest.mark.timing

OBJECTS = 40
PROCESSES = 3
LIMIT = 60.0  # GET/s let through on the prefix
SECONDS = 6.0


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_for(
    url: str,
    credentials: Credentials,
    digests: dict[str, str],
    seconds: float,
    queue: Any,
) -> None:
    """One emulated rank: read the objects again and again for `seconds`, as fast as it can."""
    config = ReaderConfig(endpoint_url=url, region="us-east-1", max_inflight_requests=16)
    reads = wrong = 0
    error = ""
    with S3Reader(config, credentials=credentials) as reader:
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                for result in reader.read_many(list(digests), ordered=False):
                    reads += 1
                    wrong += _digest(memoryview(result)) != digests[result.uri]
                    if time.monotonic() >= deadline:
                        break
        except Exception as e:  # reported to the test, which fails on it
            error = f"{type(e).__name__}: {e}"
        queue.put((reads, wrong, error, reader.stats()))


def _upload(client: Any, bucket: str, prefix: str, n: int) -> dict[str, str]:
    digests = {}
    for i in range(n):
        data = os.urandom(2000 + 37 * i)
        client.put_object(Bucket=bucket, Key=f"{prefix}{i:04d}", Body=data)
        digests[f"s3://{bucket}/{prefix}{i:04d}"] = _digest(data)
    return digests


def _credentials(endpoint: S3Endpoint) -> Credentials:
    return Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)


@pytest.mark.timeout(120)
def test_ranks_keep_a_throttled_prefix_near_its_rate_with_few_wasted_requests(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    digests = _upload(s3_client, s3_bucket, "hot/", OBJECTS)
    limit = RateLimit(f"{s3_bucket}/hot/", LIMIT)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with Proxy(s3_endpoint.url, rate_limits=[limit]) as proxy:
        args = (proxy.url, _credentials(s3_endpoint), digests, SECONDS, queue)
        ranks = [context.Process(target=_read_for, args=args) for _ in range(PROCESSES)]
        for rank in ranks:
            rank.start()
        # The window: from the first GET the limit let through (the ranks' start, forks and
        # imports on a busy machine, left out) until every rank has reported.
        passed, throttled = proxy.throttle.passed, proxy.throttle.throttled
        while passed[limit.prefix] == 0 and any(rank.is_alive() for rank in ranks):
            time.sleep(0.01)
        started, passed_before = time.monotonic(), passed[limit.prefix]
        throttled_before = throttled[limit.prefix]
        reports = [queue.get(timeout=60) for _ in ranks]
        elapsed = time.monotonic() - started
        ok = passed[limit.prefix] - passed_before
        refused = throttled[limit.prefix] - throttled_before
        for rank in ranks:
            rank.join(timeout=10)
    assert [error for _, _, error, _ in reports] == [""] * PROCESSES
    assert sum(wrong for _, wrong, _, _ in reports) == 0
    reads = sum(r for r, _, _, _ in reports)
    assert reads > 0.8 * LIMIT * SECONDS * 0.8
    # The storm happened: each rank alone asks for far more than the limit.
    assert refused > 0 and all(stats["throttled"] > 0 for *_, stats in reports)
    assert all(stats["rate_cuts"] > 0 for *_, stats in reports)
    # The bar of issue 43: at least 0.8 of the limit got through, at most 1.3 requests each.
    assert ok / elapsed >= 0.8 * LIMIT, (ok, refused, elapsed)
    assert (ok + refused) / ok <= 1.3, (ok, refused, elapsed)


def test_a_storm_that_never_ends_fails_saying_it_was_throttled_and_for_how_long(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")
    faults = Faults(slow_down=When(after_n=0))
    config = ReaderConfig(
        max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.1, max_throttled_s=1.5
    )
    with FaultProxy(s3_endpoint.url, faults=faults) as proxy:
        through = dataclasses.replace(config, endpoint_url=proxy.url, region=s3_endpoint.region)
        with S3Reader(through, credentials=_credentials(s3_endpoint)) as reader:
            started = time.monotonic()
            with pytest.raises(S3Error) as info:
                reader.read(f"s3://{s3_bucket}/k")
            waited = time.monotonic() - started
            stats = reader.stats()
        sent = proxy.stats().faults_injected["slow_down"]
    assert (info.value.code, info.value.status) == ("SlowDown", 503)
    message = str(info.value)
    assert "throttled by the endpoint without a break for 1." in message
    assert "max_throttled_s=1.5" in message and "Please reduce your request rate" in message
    assert 1.5 <= waited < 6
    # Throttles are not counted against max_attempts, and each was counted.
    assert sent > config.max_attempts and stats["throttled"] == sent
    assert stats["rate_cuts"] >= 1 and stats["send_rate_limit"] > 0


def test_a_short_burst_of_slow_downs_leaves_nothing_slow_behind(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    digests = _upload(s3_client, s3_bucket, "b/", 20)
    faults = Faults(slow_down=When(first_n=12))
    config = ReaderConfig(max_inflight_requests=8, region=s3_endpoint.region)
    with FaultProxy(s3_endpoint.url, faults=faults) as proxy:
        through = dataclasses.replace(config, endpoint_url=proxy.url)
        with S3Reader(through, credentials=_credentials(s3_endpoint)) as reader:
            limited = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                for result in reader.read_many(list(digests)):
                    assert _digest(memoryview(result)) == digests[result.uri]
                limited.append(reader.stats()["send_rate_limit"])
                if limited[-1] == 0:
                    break
            stats = reader.stats()
        injected = proxy.stats().faults_injected["slow_down"]
    assert injected == 12 == stats["throttled"]
    # The burst cut the rate, but not once per answer (answers to requests in flight together
    # are one event), and the limit was lifted again within seconds once reads went through.
    assert 1 <= stats["rate_cuts"] < injected
    assert limited[0] > 0 and limited[-1] == 0, limited


def test_a_loaders_workers_report_the_throttling_they_met(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    digests = _upload(s3_client, s3_bucket, "w/", 24)
    faults = Faults(slow_down=When(every_n=5))
    with FaultProxy(s3_endpoint.url, faults=faults) as proxy:
        config = ReaderConfig(endpoint_url=proxy.url, region=s3_endpoint.region)
        dataset = S3IterableDataset(
            f"s3://{s3_bucket}/w/", config=config, credentials=_credentials(s3_endpoint)
        )
        loader = DataLoader(dataset, batch_size=None, num_workers=2)
        read = [_digest(memoryview(item)) for item in loader]
        injected = proxy.stats().faults_injected["slow_down"]
    assert sorted(read) == sorted(digests.values())
    stats = dataset.reader_stats()
    assert stats["throttled"] == injected > 0
    assert stats["rate_cuts"] >= 1 and stats["rate_limited_ms"] >= 0


def _read_one(url: str, credentials: Credentials, uri: str, queue: Any) -> None:
    config = ReaderConfig(endpoint_url=url, region="us-east-1")
    with S3Reader(config, credentials=credentials) as reader:
        reader.read(uri)
        queue.put(reader.stats())


def test_processes_forked_from_one_share_its_send_rate_limiter(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    """What a DataLoader's workers do: the first process is throttled and cuts the shared rate;
    the second, forked from the same parent, is never throttled and still sends at that rate."""
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"value")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    uri = f"s3://{s3_bucket}/k"
    with FaultProxy(s3_endpoint.url, faults=Faults(slow_down=When(requests=(1,)))) as proxy:
        shared_rate_limiter(ReaderConfig(endpoint_url=proxy.url))  # as a dataset does
        stats = []
        for _ in range(2):
            args = (proxy.url, _credentials(s3_endpoint), uri, queue)
            child = context.Process(target=_read_one, args=args)
            child.start()
            stats.append(queue.get(timeout=30))
            child.join(timeout=10)
    first, second = stats
    assert first["throttled"] == 1 and first["rate_cuts"] == 1 and first["send_rate_limit"] > 0
    assert second["throttled"] == 0 and second["rate_cuts"] == 0
    assert second["send_rate_limit"] > 0  # the limit the first one set

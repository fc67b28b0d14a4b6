"""The proxy's emulated S3 request-rate limit (`advisor.demo.throttle`): object GETs under a
limited prefix pass at the set rate through to a real SeaweedFS, the rest get S3's 503 SlowDown
(as boto3 reads it), and other prefixes, listings and PUTs are not limited."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import botocore.config
import botocore.exceptions
import pytest

from advisor.demo.proxy import Proxy
from advisor.demo.server import S3Endpoint
from advisor.demo.throttle import PrefixThrottle, RateLimit

# every test here times a delay, a rate or a stall: `make test` runs them alone
pytestmark = pytest.mark.timing


@pytest.mark.parametrize(
    ("prefix", "rate", "burst_s", "problem"),
    [
        ("", 10, 0.1, "prefix"),
        ("bucket", 10, 0.1, "prefix"),
        ("b/", 0, 0.1, "requests_per_s"),
        ("b/", float("nan"), 0.1, "requests_per_s"),
        ("b/", 10, -1, "burst_s"),
    ],
)
def test_a_rate_limit_rejects_nonsense(
    prefix: str, rate: float, burst_s: float, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        RateLimit(prefix, rate, burst_s)


def test_the_longest_matching_prefix_decides_and_listings_pass() -> None:
    throttle = PrefixThrottle(
        [RateLimit("/b/", 1000.0, burst_s=1.0), RateLimit("b/hot/", 1.0, burst_s=0.0)]
    )
    assert throttle.admit("GET", b"/b/hot/1?x-id=GetObject")  # the one token of b/hot/
    assert not throttle.admit("GET", b"/b/hot/2")
    assert not throttle.admit("HEAD", b"/b/hot/3")
    assert throttle.admit("PUT", b"/b/hot/4")  # writes are not limited here
    assert throttle.admit("GET", b"/b?list-type=2&prefix=hot/")  # a listing
    assert throttle.admit("GET", b"/b/?list-type=2&prefix=hot/")
    assert throttle.admit("GET", b"/b/cold/1")
    assert throttle.admit("GET", b"/other/hot/1")  # no limit on that bucket
    assert throttle.passed == {"b/hot/": 1, "b/": 1}
    assert throttle.throttled == {"b/hot/": 2}
    with pytest.raises(ValueError, match="one limit per prefix"):
        PrefixThrottle([RateLimit("b/", 1.0), RateLimit("/b/", 2.0)])


def test_gets_above_the_limit_get_slow_down_and_the_rest_pass_at_the_rate(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    rate, burst_s, seconds = 30.0, 0.1, 2.0
    writer = s3_endpoint.boto3_client()
    for name in ("hot/a", "cold/a"):
        writer.put_object(Bucket=s3_bucket, Key=name, Body=name.encode())
    limit = RateLimit(f"{s3_bucket}/hot/", rate, burst_s=burst_s)
    outcomes: list[tuple[str, int, dict[str, str]]] = []
    lock = threading.Lock()
    with Proxy(s3_endpoint.url, rate_limits=[limit]) as proxy:
        opened = time.monotonic()  # the limit's bucket starts full here
        client = proxy.proxied(s3_endpoint).boto3_client(attempts=1)
        client.get_object(Bucket=s3_bucket, Key="cold/a")  # connect and sign once, unlimited
        started = time.monotonic()

        def hammer() -> None:
            while time.monotonic() - started < seconds:
                try:
                    body = client.get_object(Bucket=s3_bucket, Key="hot/a")["Body"].read()
                    assert body == b"hot/a"
                    result = ("ok", 200, {})
                except botocore.exceptions.ClientError as e:
                    meta = e.response["ResponseMetadata"]
                    result = (
                        e.response["Error"]["Code"],
                        meta["HTTPStatusCode"],
                        meta["HTTPHeaders"],
                    )
                with lock:
                    outcomes.append(result)

        with ThreadPoolExecutor(6) as pool:
            for future in [pool.submit(hammer) for _ in range(6)]:
                future.result()
        elapsed = time.monotonic() - opened
        # Other prefixes and listings are not limited, even right after the storm.
        assert client.get_object(Bucket=s3_bucket, Key="cold/a")["Body"].read() == b"cold/a"
        assert len(client.list_objects_v2(Bucket=s3_bucket, Prefix="hot/")["Contents"]) == 1
        stats = proxy.stats()
    passed = sum(1 for code, _, _ in outcomes if code == "ok")
    throttled = [(status, headers) for code, status, headers in outcomes if code == "SlowDown"]
    assert passed + len(throttled) == len(outcomes)  # nothing but success and SlowDown
    assert throttled, "the test asked for less than the limit: nothing was throttled"
    # The token bucket: the burst it starts with plus the rate, never more; the demand was above
    # the rate the whole time, so not much less either.
    assert 0.8 * rate * seconds <= passed <= limit.capacity + rate * elapsed + 1, len(outcomes)
    assert all(status == 503 for status, _ in throttled)
    headers = throttled[0][1]
    assert headers["content-type"] == "application/xml"
    assert headers["x-amz-request-id"].startswith("PROXY") and "x-amz-id-2" in headers
    assert stats.throttled == len(throttled) == proxy.throttle.throttled[limit.prefix]
    assert stats.forwarded == stats.requests - stats.throttled

"""S3's request-rate limit, emulated by the proxy (`advisor.demo.proxy`): object GETs and HEADs
under a key prefix are let through at most at a set rate, and the rest are answered with S3's
`503 Slow Down` (its headers and XML body) without reaching the server.

S3 Standard allows about 5,500 GET/HEAD requests per second per partitioned prefix and answers
the excess with `503 SlowDown`; an emulated limit lets a single machine see what a cluster of
ranks meets there:

    limit = RateLimit("bucket/train/", requests_per_s=150)
    with S3Server() as endpoint, Proxy(endpoint.url, rate_limits=(limit,)) as proxy:
        ...  # GETs of s3://bucket/train/... above 150/s get 503 SlowDown

Requests are matched by their path (path-style addressing, `/bucket/key`, which the reader uses
for custom endpoints). Listings (`GET /bucket?list-type=2`) are not limited. The limit is a token
bucket: `requests_per_s` tokens a second, at most `burst_s` seconds' worth saved up (at least
one); a request finding no token is throttled and takes none.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote
from xml.sax.saxutils import escape

from advisor.demo.connection import Connection, Request, RequestHook

__all__ = ["PrefixThrottle", "RateLimit", "SlowDownHook", "slow_down_response"]

LIMITED_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class RateLimit:
    """A request-rate limit on one key prefix, as S3 applies per partitioned prefix.

    prefix: ``bucket/`` or ``bucket/key-prefix`` (no scheme; a leading ``/`` is ignored). Object
        GETs and HEADs whose path starts with it are limited.
    requests_per_s: requests (GET/HEAD) per second let through. S3 Standard: about 5,500.
    burst_s: seconds (s) of the rate that may be saved up while fewer requests arrive, so a
        burst of up to ``requests_per_s * burst_s`` requests (at least 1) passes at once.
        Default 0.1.
    """

    prefix: str
    requests_per_s: float
    burst_s: float = 0.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", self.prefix.lstrip("/"))
        if not self.prefix or "/" not in self.prefix:
            raise ValueError(f"{self.prefix=} must be 'bucket/' or 'bucket/key-prefix'")
        if not (math.isfinite(self.requests_per_s) and self.requests_per_s > 0):
            raise ValueError(f"{self.requests_per_s=} must be > 0 requests per second")
        if not (math.isfinite(self.burst_s) and self.burst_s >= 0):
            raise ValueError(f"{self.burst_s=} must be >= 0 seconds")

    @property
    def capacity(self) -> float:
        """Most tokens the bucket holds: the largest burst let through at once."""
        return max(1.0, self.requests_per_s * self.burst_s)


class _Bucket:
    """Tokens of one `RateLimit` (on the proxy's loop thread only)."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.tokens = limit.capacity
        self.stamp = time.monotonic()

    def take(self, now: float) -> bool:
        rate = self.limit.requests_per_s
        self.tokens = min(self.limit.capacity, self.tokens + (now - self.stamp) * rate)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class PrefixThrottle:
    """The proxy's limits: `admit` says whether a request passes; `passed` and `throttled` count
    the limited requests per prefix. Called on the proxy's loop thread."""

    def __init__(self, limits: Sequence[RateLimit]) -> None:
        prefixes = [limit.prefix for limit in limits]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError(f"{prefixes=}: one limit per prefix")
        # The longest matching prefix decides, as S3's partitions are nested.
        self._buckets = sorted(
            (_Bucket(limit) for limit in limits), key=lambda b: -len(b.limit.prefix)
        )
        self.passed: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()

    def __bool__(self) -> bool:
        return bool(self._buckets)

    def admit(self, method: str, target: bytes) -> bool:
        if method not in LIMITED_METHODS or not self._buckets:
            return True
        path = unquote(target.split(b"?", 1)[0].decode("latin-1")).lstrip("/")
        if not path.partition("/")[2]:
            return True  # a bucket-level request (a listing), not an object
        for bucket in self._buckets:
            if path.startswith(bucket.limit.prefix):
                if bucket.take(time.monotonic()):
                    self.passed[bucket.limit.prefix] += 1
                    return True
                self.throttled[bucket.limit.prefix] += 1
                return False
        return True


def slow_down_response(method: str, target: bytes, number: int, close: bool) -> bytes:
    """S3's `503 SlowDown` error as S3 sends it: its XML body (none for HEAD), request ids."""
    resource = escape(target.split(b"?", 1)[0].decode("latin-1"))
    request_id = f"PROXY{number:012d}"
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
        f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode("latin-1")
    head = (
        "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\nx-amz-request-id: {request_id}\r\n"
        f"x-amz-id-2: {request_id}\r\nServer: loader-advisor-proxy\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    ).encode("latin-1")
    return head if method == "HEAD" else head + body


class SlowDownHook(RequestHook):
    """Answers the request with `503 SlowDown` instead of forwarding it (after the emulated
    latency); the request's body is read and dropped, so the connection stays usable (closed if
    the body was never sent: `Expect: 100-continue`). Counted as `ProxyStats.throttled`."""

    def __init__(self, number: int) -> None:
        self.number = number

    async def before_forward(self, conn: Connection, request: Request) -> bool | None:
        return await answer_slow_down(
            conn, request, self.number, lambda: conn.proxy.count("throttled")
        )


async def answer_slow_down(
    conn: Connection, request: Request, number: int, count: Callable[[], None]
) -> bool:
    """Answer `request` with `503 SlowDown` after the emulated latency, its body read and
    dropped (the connection closed if the body was never sent: `Expect: 100-continue`);
    `count` records it. True: the connection stays usable."""
    close = request.close or request.expects_continue  # an unsent body leaves it unusable
    if not request.expects_continue:
        await conn.discard_request_body(request)
    await conn.emulate_latency()
    count()
    await conn.send(slow_down_response(request.method, request.target, number, close))
    return not close

"""The fault-injecting proxy for the reader's tests: resets, stalls, 503 SlowDown, short bodies.

`FaultProxy` is the product's network-emulating proxy (`advisor.demo.proxy.Proxy`) with a
`RequestHook` per request that applies the `Faults` selected by `When`; it sits outside the code
under test, between the S3 client and the local S3 server:

    Faults(slow_down=When(requests=(3, 4)))            # the 3rd and 4th GET get 503 SlowDown
    Faults(truncate=When(every_n=5), truncate_at=0.5)  # every 5th GET body stops at 50 %
    Faults(stall=When(first_n=1), stall_s=10)          # the first GET body pauses for 10 s
    Faults(short_body=When(requests=(2,)))              # the 2nd GET: half its body, whole-looking
    Faults(drop_token=When(first_n=1))                  # the 1st listing page loses its token
    Faults(error=When(every_n=5), error_status=500)    # every 5th GET: 500 InternalError

    with S3Server() as endpoint, FaultProxy(endpoint.url, faults=faults) as proxy:
        client = proxy.proxied(endpoint).boto3_client()

Test infrastructure: not part of the installed package.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from xml.sax.saxutils import escape

from advisor.demo.connection import Connection, Request, RequestHook
from advisor.demo.proxy import Proxy, ProxyStats
from advisor.demo.throttle import answer_slow_down, slow_down_response

__all__ = [
    "FaultKind",
    "FaultProxy",
    "FaultStats",
    "Faults",
    "When",
    "error_response",
    "slow_down_response",
]

FaultKind = Literal[
    "reset",
    "error",
    "slow_down",
    "stall_head",
    "short_body",
    "drop_token",
    "truncate",
    "reset_mid_body",
    "stall",
]
BODY_FAULTS: tuple[FaultKind, ...] = ("truncate", "reset_mid_body", "stall")
REWRITE_FAULTS: tuple[FaultKind, ...] = ("short_body", "drop_token")
_TOKEN = re.compile(rb"<NextContinuationToken>.*?</NextContinuationToken>", re.DOTALL)


@dataclass(frozen=True)
class When:
    """Which requests a fault hits; a request matches if any selector matches.

    Requests are numbered 1, 2, 3, ... in the order the proxy reads their heads, across all
    connections, counting only requests whose method is in `methods` (so with the default,
    `every_n=5` means every 5th GET and non-GET requests are never hit).

    requests: these request numbers, e.g. `(3, 4)` or `range(10, 15)`.
    first_n: requests 1 .. first_n. Default 0 (off).
    every_n: requests every_n, 2 * every_n, ... Default 0 (off).
    after_n: every request after the first after_n (`after_n=0`: all). Default None (off).
    methods: HTTP methods counted and hit. Default GET only; None = every method.
    """

    requests: Collection[int] = ()
    first_n: int = 0
    every_n: int = 0
    after_n: int | None = None
    methods: Collection[str] | None = ("GET",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", frozenset(self.requests))
        if self.methods is not None:
            object.__setattr__(self, "methods", frozenset(m.upper() for m in self.methods))
        if any(n < 1 for n in self.requests):
            raise ValueError(f"{sorted(self.requests)=}: request numbers start at 1")
        if self.first_n < 0 or self.every_n < 0:
            raise ValueError(f"{self.first_n=} and {self.every_n=} must be >= 0")
        if self.after_n is not None and self.after_n < 0:
            raise ValueError(f"{self.after_n=} must be >= 0 or None")
        if not (self.requests or self.first_n or self.every_n or self.after_n is not None):
            raise ValueError("When() selects no request: set requests, first_n, every_n or after_n")

    def counts(self, method: str) -> bool:
        """Whether requests with this method are numbered (and may be hit)."""
        return self.methods is None or method in self.methods

    def matches(self, number: int) -> bool:
        """Whether the request with this number (among counted requests) is hit."""
        return (
            number in self.requests
            or number <= self.first_n
            or (self.every_n > 0 and number % self.every_n == 0)
            or (self.after_n is not None and number > self.after_n)
        )


@dataclass(frozen=True)
class Faults:
    """Faults to inject, each selected by a `When`; all off by default. At most one per request:
    the first matching in the order reset, error, slow_down, stall_head, short_body,
    drop_token, truncate, reset_mid_body, stall.

    reset: on reading the request head, reset the connection (RST, no response byte, request not
        forwarded). The client sees ECONNRESET (`ConnectionResetError`) instead of a response.
    error: answer `error_status` with an S3 XML error body whose code is `error_code` (default
        500 InternalError; 403 RequestTimeTooSkewed, InvalidAccessKeyId, ExpiredToken, 404
        NoSuchBucket, ...) without forwarding, as `slow_down` does; its `Date` header is the
        proxy's clock moved by `server_clock_s` (a storage whose clock is that far ahead).
    slow_down: answer `503 Slow Down` with an S3 XML error body (`<Code>SlowDown</Code>`) without
        forwarding; the request body is read and dropped and the connection stays usable (closed
        if the request carried `Expect: 100-continue`).
    truncate: send the head with the full Content-Length, then the first `truncate_at` fraction of
        the body (at least one byte short), then close cleanly (FIN). `http.client` raises
        `IncompleteRead`.
    reset_mid_body: like truncate, but after `reset_at` of the body the connection is reset (RST):
        the client reads those bytes, then gets `ConnectionResetError`.
    stall: after `stall_at` of the body (0 = right after the head) send nothing for `stall_s`
        seconds, then the rest; a client with a shorter read timeout times out.
    stall_head: forward the request, then hold the response head back for `stall_s` seconds
        (on top of any latency): a long time to first byte.
    short_body: send the first `short_at` fraction of a successful (2xx) response's body (at
        least one byte short) with a Content-Length that says that is all: a response that looks
        whole, as from a server or proxy that cut it and fixed the length, or a body ended by a
        close where no length was given. Only the body's own end can tell it is short.
    drop_token: remove `<NextContinuationToken>...</NextContinuationToken>` from a successful
        response's body (a listing page then says IsTruncated=true with no way on), its
        Content-Length fixed: what a broken proxy or S3-compatible server does.

    Body faults hit only responses with a non-empty body; with no Content-Length (chunked or
    until-close bodies) they strike right after the head. A cut lands on a whole byte count,
    `int(length * fraction)`, at most `length - 1`. `FaultStats.faults_injected` counts each fault
    when it is applied.
    """

    reset: When | None = None
    error: When | None = None
    error_status: int = 500
    error_code: str = "InternalError"
    server_clock_s: float = 0.0
    slow_down: When | None = None
    truncate: When | None = None
    truncate_at: float = 0.5
    reset_mid_body: When | None = None
    reset_at: float = 0.5
    stall: When | None = None
    stall_s: float = 10.0
    stall_at: float = 0.5
    stall_head: When | None = None
    short_body: When | None = None
    short_at: float = 0.5
    drop_token: When | None = None

    def __post_init__(self) -> None:
        for name in ("truncate_at", "reset_at", "stall_at", "short_at"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value!r} must be a fraction of the body in [0, 1]")
        if not self.stall_s >= 0:
            raise ValueError(f"{self.stall_s=} must be >= 0 seconds")

    def rules(self) -> tuple[tuple[FaultKind, When], ...]:
        """The active rules in precedence order."""
        kinds: tuple[FaultKind, ...] = (
            "reset",
            "error",
            "slow_down",
            "stall_head",
            *REWRITE_FAULTS,
            *BODY_FAULTS,
        )
        return tuple((kind, when) for kind in kinds if (when := getattr(self, kind)) is not None)

    def fraction(self, kind: FaultKind) -> float:
        return {"truncate": self.truncate_at, "reset_mid_body": self.reset_at}.get(
            kind, self.stall_at
        )


@dataclass(frozen=True)
class FaultStats(ProxyStats):
    """`ProxyStats` plus how many times each `FaultKind` was applied (kinds never applied are
    absent)."""

    faults_injected: Mapping[str, int] = field(default_factory=dict)


class _FaultHook(RequestHook):
    """Applies one fault of `kind` to the request numbered `number`."""

    def __init__(self, proxy: FaultProxy, kind: FaultKind, number: int) -> None:
        self.proxy = proxy
        self.kind = kind
        self.number = number

    async def before_forward(self, conn: Connection, request: Request) -> bool | None:
        if self.kind == "reset":
            self.proxy.count_fault("reset")
            conn.reset()
            return False
        if self.kind == "error":
            return await self._answer_error(conn, request)
        if self.kind != "slow_down":
            return None
        return await answer_slow_down(
            conn, request, self.number, lambda: self.proxy.count_fault("slow_down")
        )

    async def _answer_error(self, conn: Connection, request: Request) -> bool:
        faults = self.proxy.faults
        close = request.close or request.expects_continue  # an unsent body leaves it unusable
        if not request.expects_continue:
            await conn.discard_request_body(request)
        await conn.emulate_latency()
        self.proxy.count_fault("error")
        await conn.send(error_response(request, self.number, faults, close))
        return not close

    async def before_response_head(self, conn: Connection) -> None:
        if self.kind == "stall_head":
            self.proxy.count_fault("stall_head")
            await asyncio.sleep(self.proxy.faults.stall_s)

    def rewrite_body(self, status: int) -> Callable[[bytes], bytes] | None:
        if self.kind not in REWRITE_FAULTS or not 200 <= status < 300:
            return None
        return self._short if self.kind == "short_body" else self._without_token

    def _short(self, body: bytes) -> bytes:
        if not body:
            return body
        self.proxy.count_fault("short_body")
        return body[: min(int(len(body) * self.proxy.faults.short_at), len(body) - 1)]

    def _without_token(self, body: bytes) -> bytes:
        changed, found = _TOKEN.subn(b"", body)
        if found:
            self.proxy.count_fault("drop_token")
        return changed

    def body_cut(self, length: int | None) -> int | None:
        if self.kind not in BODY_FAULTS:
            return None
        fraction = self.proxy.faults.fraction(self.kind)
        return 0 if length is None else min(int(length * fraction), length - 1)

    async def at_cut(self, conn: Connection) -> bool:
        self.proxy.count_fault(self.kind)
        await conn.flush()
        if self.kind == "stall":
            await asyncio.sleep(self.proxy.faults.stall_s)
            return True
        if self.kind == "reset_mid_body":
            conn.reset()
        else:  # truncate: a clean close after the bytes sent so far
            await conn.close()
        return False


def error_response(request: Request, number: int, faults: Faults, close: bool) -> bytes:
    """An S3 error answer as S3 sends it: status, XML body (none for HEAD), request ids, and a
    `Date` of the storage's clock."""
    resource = escape(request.target.split(b"?", 1)[0].decode("latin-1"))
    request_id = f"PROXY{number:012d}"
    code = escape(faults.error_code)
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>injected by the fault proxy</Message>"
        f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode("latin-1")
    date = email.utils.formatdate(time.time() + faults.server_clock_s, usegmt=True)
    head = (
        f"HTTP/1.1 {faults.error_status} Error\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\nDate: {date}\r\nx-amz-request-id: {request_id}\r\n"
        f"Server: loader-advisor-proxy\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    ).encode("latin-1")
    return head if request.method == "HEAD" else head + body


class FaultProxy(Proxy):
    """`Proxy` that also injects `faults` (see `Faults`); `stats()` counts them."""

    def __init__(self, upstream_url: str, *, faults: Faults = Faults(), **options: Any) -> None:
        super().__init__(upstream_url, **options)
        self.faults = faults
        self._faults_injected: Counter[str] = Counter()
        self._method_counts: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, {self.faults})"

    def stats(self) -> FaultStats:
        return FaultStats(**vars(super().stats()), faults_injected=dict(self._faults_injected))

    def count_fault(self, kind: FaultKind) -> None:
        self._faults_injected[kind] += 1

    def request_hook(self, method: str, target: bytes) -> RequestHook:
        """Number the request and pick its fault (on the loop thread, so numbering is exact)."""
        self._method_counts[method] += 1
        for kind, when in self.faults.rules():
            if not when.counts(method):
                continue
            if when.methods is None:
                number = sum(self._method_counts.values())
            else:
                number = sum(self._method_counts[m] for m in when.methods)
            if when.matches(number):
                return _FaultHook(self, kind, number)
        return super().request_hook(method, target)

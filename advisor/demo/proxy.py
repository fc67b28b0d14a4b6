"""An HTTP/1.1-aware TCP proxy on 127.0.0.1 that emulates a network.

It sits in front of the local S3 server (SeaweedFS, see `server.py`) or any HTTP/1.1 server so that
real-S3 behaviour shows up on loopback (`python -m advisor.demo serve --latency-ms`, the
benchmarks): `NetworkProfile.latency_ms` is added before the first byte of every response (per
request, also on keep-alive connections) and `NetworkProfile.bandwidth_mbps` caps each
connection's response bodies with a token bucket. `rate_limits` emulate S3's request-rate limit
per key prefix: GETs above it are answered `503 SlowDown` (`advisor.demo.throttle`).

A subclass may change single exchanges through `Proxy.request_hook` (a `RequestHook` sees the
request, the response head and a cut in the body, on a public `Connection`); the test suite's
fault-injecting proxy (`testing.faults`, not part of the product) is built that way.

Requests pass through byte for byte, Host header included, so SigV4-signed requests still verify
as long as the client is configured with the proxy's URL (`Proxy.proxied(endpoint)`). Each client
connection gets its own upstream connection. The asyncio server runs on its own thread, so
synchronous tests and the CLI can use it:

    with S3Server() as endpoint, Proxy(endpoint.url, network=NetworkProfile(20, 90)) as proxy:
        client = proxy.proxied(endpoint).boto3_client()

The pieces: HTTP/1.1 framing in `http.py`, the emulated network in `network.py`, one client
connection's relay in `connection.py`; this module holds the proxy's lifecycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from advisor.demo.connection import NO_HOOK, STREAM_LIMIT, Connection, Request, RequestHook
from advisor.demo.network import NetworkProfile
from advisor.demo.streams import within
from advisor.demo.throttle import PrefixThrottle, RateLimit, SlowDownHook

if TYPE_CHECKING:
    from advisor.demo.server import S3Endpoint

__all__ = [
    "Connection",
    "NetworkProfile",
    "Proxy",
    "ProxyError",
    "ProxyStats",
    "RateLimit",
    "Request",
    "RequestHook",
]

HOST = "127.0.0.1"
# Connections waiting to be accepted (the kernel caps it at net.core.somaxconn). S3 does not drop
# a connection storm's SYNs; with 512, 8 DataLoader workers opening 213 connections each
# overflowed it 352-879 times in 2 s, and each drop cost its client a 1 s SYN retransmit.
BACKLOG = 4096
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
NO_EMULATION = NetworkProfile()  # the default network: adds nothing


class ProxyError(RuntimeError):
    """The proxy could not be started, or is not running."""


@dataclass(frozen=True)
class ProxyStats:
    """Counters since the proxy was created (a snapshot; `Proxy.stats()` takes a new one).

    connections: client connections accepted; active_connections: of those, still open.
    requests: request heads read from clients; forwarded: of those, sent upstream (not reset or
        answered by a `RequestHook`).
    throttled: requests answered `503 SlowDown` by a `RateLimit` (not forwarded).
    bytes_to_client: every byte written to clients, response heads included.
    bytes_from_upstream: every byte of response heads and bodies read from upstream.
    """

    connections: int
    active_connections: int
    requests: int
    forwarded: int
    bytes_to_client: int
    bytes_from_upstream: int
    throttled: int = 0


class Proxy:
    """The proxy on 127.0.0.1, serving on its own thread. Use as a context manager or
    start()/stop(); `url` is valid while it runs.

    upstream_url: `http://host:port` of the server behind it (https is not supported).
    network: what to emulate; see `NetworkProfile`.
    port: port to listen on; default a free one.
    idle_timeout_s: a client connection idle this long between requests is closed. Default 60.
    io_timeout_s: bound on every wait for the peer within an exchange (connect, read, write).
    rate_limits: request-rate limits per key prefix (`RateLimit`); above one, object GETs and
        HEADs are answered `503 SlowDown`. Default none.
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        network: NetworkProfile = NO_EMULATION,
        port: int | None = None,
        idle_timeout_s: float = 60.0,
        io_timeout_s: float = 30.0,
        rate_limits: Sequence[RateLimit] = (),
    ) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"{upstream_url=} must look like http://host:port")
        if not (idle_timeout_s > 0 and io_timeout_s > 0):
            raise ValueError(f"{idle_timeout_s=} and {io_timeout_s=} must be > 0 seconds")
        self.upstream_url = upstream_url
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.network = network
        self.idle_timeout_s = idle_timeout_s
        self.io_timeout_s = io_timeout_s
        self._requested_port = port
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._counters: Counter[str] = Counter()
        self.rate_limits = tuple(rate_limits)
        self.throttle = PrefixThrottle(self.rate_limits)

    def __repr__(self) -> str:
        where = f"http://{HOST}:{self._port}" if self._port is not None else "stopped"
        return f"{type(self).__name__}({where} -> {self.upstream_url}, {self.network})"

    @property
    def url(self) -> str:
        if self._port is None:
            raise ProxyError("proxy not running; call start() or use it as a context manager")
        return f"http://{HOST}:{self._port}"

    def proxied(self, endpoint: S3Endpoint) -> S3Endpoint:
        """The S3 endpoint as seen through this proxy: same credentials, the proxy's URL."""
        return replace(endpoint, url=self.url)

    def stats(self) -> ProxyStats:
        c = self._counters
        return ProxyStats(
            connections=c["connections"],
            active_connections=len(self._tasks),
            requests=c["requests"],
            forwarded=c["forwarded"],
            bytes_to_client=c["bytes_to_client"],
            bytes_from_upstream=c["bytes_from_upstream"],
            throttled=c["throttled"],
        )

    def start(self) -> Proxy:
        if self._loop is not None:
            raise ProxyError("proxy already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._closing = False
        self._thread = threading.Thread(
            target=self._run_loop, args=(loop,), name="loader-advisor-proxy"
        )
        self._thread.daemon = True
        self._thread.start()
        try:
            future = asyncio.run_coroutine_threadsafe(self._open(), loop)
            self._port = future.result(timeout=START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every open connection (RST/FIN, whatever is in flight)."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        self._port = None
        if loop is None or thread is None:
            return
        try:
            if loop.is_running():
                future = asyncio.run_coroutine_threadsafe(self._close(), loop)
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    future.result(timeout=STOP_TIMEOUT_S)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=STOP_TIMEOUT_S)
            if not thread.is_alive():
                loop.close()

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # On the proxy's thread.

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(RuntimeError):
                loop.run_until_complete(loop.shutdown_asyncgens())

    async def _open(self) -> int:
        self._server = await asyncio.start_server(
            self._on_client, HOST, self._requested_port or 0, limit=STREAM_LIMIT, backlog=BACKLOG
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        for _ in range(20):  # cancel again what is still running, e.g. accepted while closing
            tasks = list(self._tasks)
            if not tasks:
                break
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S / 40)
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self._server.wait_closed(), STOP_TIMEOUT_S / 3)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if self._closing or task is None:
            writer.transport.abort()
            return
        self._tasks.add(task)
        self.count("connections")
        try:
            await Connection(self, reader, writer).run()
        except asyncio.CancelledError:
            pass  # stop(): the session's finally has closed both sides
        except Exception:  # a bug in the proxy must not kill the loop; the client sees a close
            writer.transport.abort()
        finally:
            self._tasks.discard(task)

    def count(self, name: str, n: int = 1) -> None:
        """Add `n` to the counter `name` (a `ProxyStats` field); connections call it on the loop
        thread."""
        self._counters[name] += n

    def request_hook(self, method: str, target: bytes) -> RequestHook:
        """The hook for the next request with this (upper-case) method and request target, called
        on the loop thread in the order request heads arrive. This proxy answers a request above a
        `RateLimit` with 503 SlowDown and changes nothing else; subclasses override it."""
        if self.throttle and not self.throttle.admit(method, target):
            return SlowDownHook(self._counters["requests"])
        return NO_HOOK

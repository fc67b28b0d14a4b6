"""An HTTP/1.1-aware TCP proxy on 127.0.0.1 that emulates a network.

It sits in front of the local S3 server (SeaweedFS, see `server.py`) or any HTTP/1.1 server so that
real-S3 behaviour shows up on loopback (`python -m advisor.demo serve --latency-ms`, the
benchmarks): `NetworkProfile.latency_ms` is added before the first byte of every response (per
request, also on keep-alive connections) and `NetworkProfile.bandwidth_mbps` caps each
connection's response bodies with a token bucket.

A subclass may change single exchanges through `Proxy.request_hook` (a `RequestHook` sees the
request, the response head and a cut in the body, on a public `Connection`); the test suite's
fault-injecting proxy (`testing.faults`, not part of the product) is built that way.

Requests pass through byte for byte, Host header included, so SigV4-signed requests still verify
as long as the client is configured with the proxy's URL (`Proxy.proxied(endpoint)`). Each client
connection gets its own upstream connection. The asyncio server runs on its own thread, so
synchronous tests and the CLI can use it:

    with S3Server() as endpoint, Proxy(endpoint.url, network=NetworkProfile(20, 90)) as proxy:
        client = proxy.proxied(endpoint).boto3_client()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from advisor.demo.server import S3Endpoint

__all__ = [
    "Connection",
    "NetworkProfile",
    "Proxy",
    "ProxyError",
    "ProxyStats",
    "Request",
    "RequestHook",
]

HOST = "127.0.0.1"
MAX_HEAD_BYTES = 64 * 1024  # a larger request head is answered with 431 and the connection closed
MAX_LINE_BYTES = 8 * 1024  # a chunk-size or trailer line
MAX_INTERIM_RESPONSES = 8  # 1xx responses relayed before the final one
MAX_REQUESTS_PER_CONNECTION = 1_000_000
CHUNK_BYTES = 1024 * 1024  # read size; large reads keep the proxy well above 300 MB/s on loopback
STREAM_LIMIT = 2 * CHUNK_BYTES  # asyncio stream buffer limit (reading pauses above twice this)
WRITE_HIGH_WATER = 4 * CHUNK_BYTES
# Connections waiting to be accepted (the kernel caps it at net.core.somaxconn). S3 does not drop
# a connection storm's SYNs; with 512, 8 DataLoader workers opening 213 connections each
# overflowed it 352-879 times in 2 s, and each drop cost its client a 1 s SYN retransmit.
BACKLOG = 4096
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
FLUSH_TIMEOUT_S = 1.0  # before a mid-body reset: wait this long at most for the client to ack


class ProxyError(RuntimeError):
    """The proxy could not be started, or is not running."""


@dataclass(frozen=True)
class NetworkProfile:
    """Emulated network between client and server; the defaults add nothing.

    latency_ms: milliseconds added before the first byte of every response (after the upstream
        answered), per request, also on keep-alive connections. Default 0.
    bandwidth_mbps: megabytes per second (MB/s = 10**6 bytes/s, not megabits) allowed per client
        connection for response bodies, enforced by a token bucket with a burst of 10 ms worth of
        bytes (at least 64 KiB). Real S3 gives about 90 MB/s per connection. 0 = unlimited.
    """

    latency_ms: float = 0.0
    bandwidth_mbps: float = 0.0

    def __post_init__(self) -> None:
        if not self.latency_ms >= 0:
            raise ValueError(f"{self.latency_ms=} must be >= 0 milliseconds")
        if not self.bandwidth_mbps >= 0:
            raise ValueError(f"{self.bandwidth_mbps=} must be >= 0 MB/s (0 = unlimited)")

    @property
    def bytes_per_second(self) -> float:
        return self.bandwidth_mbps * 1e6


@dataclass(frozen=True)
class ProxyStats:
    """Counters since the proxy was created (a snapshot; `Proxy.stats()` takes a new one).

    connections: client connections accepted; active_connections: of those, still open.
    requests: request heads read from clients; forwarded: of those, sent upstream (not reset or
        answered by a `RequestHook`).
    bytes_to_client: every byte written to clients, response heads included.
    bytes_from_upstream: every byte of response heads and bodies read from upstream.
    """

    connections: int
    active_connections: int
    requests: int
    forwarded: int
    bytes_to_client: int
    bytes_from_upstream: int


# --- HTTP/1.1 message parsing -------------------------------------------------------------------


class _BadMessage(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


class _Closed(Exception):
    """The exchange ended in a way that leaves the connection unusable."""


@dataclass
class _Head:
    raw: bytes
    first: tuple[bytes, bytes, bytes]
    headers: list[tuple[bytes, bytes]]

    @classmethod
    def parse(cls, raw: bytes, status: int) -> _Head:
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2:
            raise _BadMessage(status, "malformed start line")
        first = (parts[0], parts[1], parts[2] if len(parts) == 3 else b"")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise _BadMessage(status, "malformed header line")
            headers.append((name.lower(), value.strip()))
        return cls(raw, first, headers)

    def get_all(self, name: bytes) -> list[bytes]:
        return [v for n, v in self.headers if n == name]

    def tokens(self, name: bytes) -> list[bytes]:
        return [t.strip().lower() for v in self.get_all(name) for t in v.split(b",") if t.strip()]

    def content_length(self, status: int) -> int | None:
        values = {v.strip() for v in self.get_all(b"content-length")}
        if not values:
            return None
        if len(values) > 1 or not all(v.isdigit() for v in values):
            raise _BadMessage(status, "invalid Content-Length")
        return int(values.pop())

    def is_chunked(self, status: int) -> bool | None:
        """True for chunked, None without Transfer-Encoding, False for another final coding."""
        codings = self.tokens(b"transfer-encoding")
        if not codings:
            return None
        return codings[-1] == b"chunked"

    def wants_close(self, version: bytes) -> bool:
        connection = self.tokens(b"connection")
        if version == b"HTTP/1.0":
            return b"keep-alive" not in connection
        return b"close" in connection


_NONE, _FIXED, _CHUNKED, _UNTIL_CLOSE = "none", "fixed", "chunked", "until_close"


def _request_body(head: _Head) -> tuple[str, int]:
    chunked = head.is_chunked(400)
    if chunked:
        return _CHUNKED, 0
    if chunked is False:
        raise _BadMessage(400, "request body length unknown (Transfer-Encoding not chunked)")
    length = head.content_length(400)
    return (_FIXED, length) if length else (_NONE, 0)


def _response_body(method: bytes, status: int, head: _Head) -> tuple[str, int]:
    if method == b"HEAD" or 100 <= status < 200 or status in (204, 304):
        return _NONE, 0
    chunked = head.is_chunked(502)
    if chunked:
        return _CHUNKED, 0
    length = head.content_length(502) if chunked is None else None
    return (_UNTIL_CLOSE, 0) if length is None else (_FIXED, length)


def _simple_response(status: int, reason: str, body: bytes, headers: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n{headers}"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


# --- the per-connection exchange ----------------------------------------------------------------


_T = TypeVar("_T")

if sys.version_info >= (3, 11):

    async def _within(awaitable: Awaitable[_T], timeout: float) -> _T:
        """`awaitable`, or TimeoutError after `timeout` seconds. Unlike 3.11's wait_for it never
        swallows a cancellation (stop() relies on that) and starts no extra task."""
        async with asyncio.timeout(timeout):
            return await awaitable

else:

    async def _within(awaitable: Awaitable[_T], timeout: float) -> _T:
        return await asyncio.wait_for(awaitable, timeout)


class _TokenBucket:
    """Paces bytes to `rate` per second with a burst of `capacity`; debt is repaid by sleeping."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(64 * 1024.0, rate / 100)
        self.piece = int(self.capacity)
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    async def take(self, n: int) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate) - n
        self.stamp = now
        if self.tokens < 0:
            await asyncio.sleep(-self.tokens / self.rate)


@dataclass(frozen=True)
class Request:
    """One request as read from the client (its head only; the body is still to be read)."""

    method: str  # upper case
    target: bytes
    close: bool  # the client asked to close the connection after this exchange
    expects_continue: bool  # `Expect: 100-continue`: the body follows only after a 100 answer
    body_mode: str
    body_length: int


class RequestHook:
    """Changes to one exchange; this base class changes nothing. `Proxy.request_hook` returns one
    per request. Every method runs on the proxy's event loop."""

    async def before_forward(self, conn: Connection, request: Request) -> bool | None:
        """None: forward the request. Otherwise the hook answered it (or dropped the connection)
        itself and the result says whether the connection may carry another request."""
        return None

    async def before_response_head(self, conn: Connection) -> None:
        """Runs after the emulated latency, before the response head goes to the client."""

    def body_cut(self, length: int | None) -> int | None:
        """Offset in a non-empty response body (`length` None: unknown) at which to call `at_cut`,
        or None for no cut."""
        return None

    async def at_cut(self, conn: Connection) -> bool:
        """The body up to the cut has been sent; whether to send the rest."""
        return True


_NO_HOOK = RequestHook()


class Connection:
    """One client connection and its upstream connection; a `RequestHook` acts through the public
    methods (send, flush, reset, close, discard_request_body, emulate_latency)."""

    def __init__(
        self, proxy: Proxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.cr = reader
        self.cw = writer
        self.ur: asyncio.StreamReader | None = None
        self.uw: asyncio.StreamWriter | None = None
        rate = proxy.network.bytes_per_second
        self.bucket = _TokenBucket(rate) if rate > 0 else None
        self.latency_s = proxy.network.latency_ms / 1000

    async def run(self) -> None:
        try:
            for _ in range(MAX_REQUESTS_PER_CONNECTION):
                if not await self._exchange():
                    break
        except (_Closed, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            self.cw.transport.abort()
            if self.uw is not None:
                self.uw.transport.abort()

    # I/O helpers, each bounded by a timeout.

    async def _read_head(self, reader: asyncio.StreamReader, timeout: float, status: int) -> bytes:
        try:
            raw = await _within(reader.readuntil(b"\r\n\r\n"), timeout)
        except asyncio.LimitOverrunError as e:
            raise _BadMessage(status, "head too large") from e
        if len(raw) > MAX_HEAD_BYTES:
            raise _BadMessage(status, "head too large")
        return raw

    async def _read(self, reader: asyncio.StreamReader, n: int) -> bytes:
        return await _within(reader.read(n), self.proxy.io_timeout_s)

    async def _read_line(self, reader: asyncio.StreamReader) -> bytes:
        try:
            line = await _within(reader.readuntil(b"\r\n"), self.proxy.io_timeout_s)
        except asyncio.LimitOverrunError as e:
            raise _Closed("line too long") from e
        if len(line) > MAX_LINE_BYTES:
            raise _Closed("line too long")
        return line

    async def _send(self, data: bytes) -> None:
        if self.cw.transport.is_closing():
            # the client left: stop relaying (asyncio would log every write after the loss)
            raise _Closed("client closed the connection")
        self.proxy._count("bytes_to_client", len(data))  # first: the client may look at once
        self.cw.write(data)
        if self.cw.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await _within(self.cw.drain(), self.proxy.io_timeout_s)

    async def _send_body(self, data: bytes) -> None:
        if self.bucket is None:
            await self._send(data)
            return
        piece = self.bucket.piece
        for start in range(0, len(data), piece):
            chunk = data[start : start + piece]
            await self.bucket.take(len(chunk))
            await self._send(chunk)

    async def _body(
        self, reader: asyncio.StreamReader, mode: str, length: int
    ) -> AsyncGenerator[bytes, None]:
        """The raw bytes of a message body (chunk framing included). Stops early at EOF; the
        caller compares with what it expected."""
        if mode == _FIXED:
            remaining = length
            while remaining > 0:  # bounded: every round consumes bytes or returns
                data = await self._read(reader, min(remaining, CHUNK_BYTES))
                if not data:
                    return
                remaining -= len(data)
                yield data
        elif mode == _UNTIL_CLOSE:
            while data := await self._read(reader, CHUNK_BYTES):  # bounded by the peer's close
                yield data
        elif mode == _CHUNKED:
            async for data in self._chunked(reader):
                yield data

    async def _chunked(self, reader: asyncio.StreamReader) -> AsyncGenerator[bytes, None]:
        while True:  # bounded: every round consumes a chunk-size line
            line = await self._read_line(reader)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as e:
                raise _Closed("bad chunk size") from e
            yield line
            if size == 0:
                for _ in range(MAX_HEAD_BYTES // 2):  # trailer lines, then an empty line
                    line = await self._read_line(reader)
                    yield line
                    if line == b"\r\n":
                        return
                raise _Closed("too many trailer lines")
            remaining = size + 2  # data and its CRLF
            while remaining > 0:
                data = await self._read(reader, min(remaining, CHUNK_BYTES))
                if not data:
                    raise _Closed("EOF inside a chunk")
                remaining -= len(data)
                yield data

    # The exchange.

    async def _exchange(self) -> bool:
        """Relay one request and its response; whether the connection can carry another."""
        proxy = self.proxy
        try:
            raw = await self._read_head(self.cr, proxy.idle_timeout_s, 431)
        except asyncio.IncompleteReadError:
            return False  # the client closed between requests
        except _BadMessage as e:
            await self._refuse(e)
            return False
        proxy._count("requests")
        try:
            request = _Head.parse(raw, 400)
            method, target, version = request.first
            body_mode, body_length = _request_body(request)
        except _BadMessage as e:
            await self._refuse(e)
            return False
        close = request.wants_close(version)
        expects_continue = version == b"HTTP/1.1" and b"100-continue" in request.tokens(b"expect")
        name = method.decode("latin-1").upper()
        hook = proxy.request_hook(name)
        answered = await hook.before_forward(
            self, Request(name, target, close, expects_continue, body_mode, body_length)
        )
        if answered is not None:
            return answered

        if expects_continue:
            await self._send(b"HTTP/1.1 100 Continue\r\n\r\n")
        if not await self._connect_upstream():
            return False
        assert self.ur is not None and self.uw is not None
        self.uw.write(raw)
        async with contextlib.aclosing(self._body(self.cr, body_mode, body_length)) as body:
            async for data in body:
                self.uw.write(data)
                if self.uw.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                    await _within(self.uw.drain(), proxy.io_timeout_s)
        proxy._count("forwarded")
        return await self._relay_response(method, close, hook)

    async def _relay_response(self, method: bytes, close: bool, hook: RequestHook) -> bool:
        assert self.ur is not None
        proxy = self.proxy
        latency_due = True
        for _ in range(MAX_INTERIM_RESPONSES + 1):
            try:
                raw = await self._read_head(self.ur, proxy.io_timeout_s, 502)
                response = _Head.parse(raw, 502)
                version, code, _ = response.first
                status = int(code) if code.isdigit() and len(code) == 3 else 0
                if not version.startswith(b"HTTP/1.") or status < 100:
                    raise _BadMessage(502, "malformed status line")
                mode, length = _response_body(method, status, response)
            except (_BadMessage, asyncio.IncompleteReadError) as e:
                bad = e if isinstance(e, _BadMessage) else _BadMessage(502, "upstream closed")
                await self._refuse(bad)
                return False
            proxy._count("bytes_from_upstream", len(raw))
            if status == 100:
                continue  # the proxy itself answered `Expect: 100-continue`
            if latency_due:
                latency_due = False
                await self.emulate_latency()
                await hook.before_response_head(self)
            await self._send(raw)
            if status == 101:
                return False  # protocol switches are not relayed
            if status >= 200:
                break
        else:
            return False
        ok = await self._relay_body(mode, length, hook)
        return ok and not close and mode != _UNTIL_CLOSE and not response.wants_close(version)

    async def _relay_body(self, mode: str, length: int, hook: RequestHook) -> bool:
        assert self.ur is not None
        proxy = self.proxy
        cut: int | None = None
        if mode != _NONE and not (mode == _FIXED and length == 0):
            cut = hook.body_cut(length if mode == _FIXED else None)
        sent = 0
        async with contextlib.aclosing(self._body(self.ur, mode, length)) as body:
            async for data in body:
                proxy._count("bytes_from_upstream", len(data))
                if cut is not None and sent + len(data) > cut:
                    before = cut - sent
                    await self._send_body(data[:before])
                    sent += before
                    data = data[before:]
                    cut = None
                    if not await hook.at_cut(self):
                        return False
                await self._send_body(data)
                sent += len(data)
        return mode != _FIXED or sent == length

    # What a RequestHook may do.

    async def send(self, data: bytes) -> None:
        """Write raw bytes to the client (a whole response, or part of one)."""
        await self._send(data)

    async def discard_request_body(self, request: Request) -> None:
        """Read the request's body from the client and drop it."""
        async with contextlib.aclosing(
            self._body(self.cr, request.body_mode, request.body_length)
        ) as body:
            async for _ in body:
                pass

    async def emulate_latency(self) -> None:
        """Wait the network profile's latency (the proxy does this before every response head)."""
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)

    def reset(self) -> None:
        """Make the connection's coming close an RST instead of a FIN (return False after it)."""
        _set_linger_zero(self.cw)

    async def close(self) -> None:
        """Close the client connection cleanly (FIN) after what was sent so far."""
        self.cw.close()
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            await _within(self.cw.wait_closed(), FLUSH_TIMEOUT_S)

    async def flush(self) -> None:
        """Wait until the bytes written so far have reached the client (bounded)."""
        await self._flush()

    async def _flush(self) -> None:
        """Wait until the bytes written so far have reached the client (bounded)."""
        transport = self.cw.transport
        transport.set_write_buffer_limits(high=0)
        try:
            await _within(self.cw.drain(), self.proxy.io_timeout_s)
        finally:
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while _unacked_bytes(self.cw) > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)

    async def _connect_upstream(self) -> bool:
        """Open the upstream connection, or open it again if the server closed it while idle."""
        if self.ur is not None and self.uw is not None:
            if not self.ur.at_eof() and not self.uw.is_closing():
                return True
            self.uw.transport.abort()
            self.ur = self.uw = None
        proxy = self.proxy
        try:
            self.ur, self.uw = await _within(
                asyncio.open_connection(
                    proxy.upstream_host, proxy.upstream_port, limit=STREAM_LIMIT
                ),
                proxy.io_timeout_s,
            )
        except (OSError, asyncio.TimeoutError):
            await self._refuse(_BadMessage(502, "upstream unreachable"))
            return False
        return True

    async def _refuse(self, error: _BadMessage) -> None:
        reasons = {400: "Bad Request", 431: "Request Header Fields Too Large", 502: "Bad Gateway"}
        body = f"loader-advisor proxy: {error.reason}\n".encode()
        await self._send(_simple_response(error.status, reasons[error.status], body))
        await self._flush()


def _set_linger_zero(writer: asyncio.StreamWriter) -> None:
    """Make the coming close send RST instead of FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _unacked_bytes(writer: asyncio.StreamWriter) -> int:
    """Bytes in the kernel send queue not yet acknowledged by the peer (0 where unknown)."""
    sock = writer.get_extra_info("socket")
    try:
        import fcntl
        import termios

        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
        return int(struct.unpack("i", raw)[0])
    except (AttributeError, ImportError, OSError, ValueError):
        return 0


# --- the proxy ----------------------------------------------------------------------------------


class Proxy:
    """The proxy on 127.0.0.1, serving on its own thread. Use as a context manager or
    start()/stop(); `url` is valid while it runs.

    upstream_url: `http://host:port` of the server behind it (https is not supported).
    network: what to emulate; see `NetworkProfile`.
    port: port to listen on; default a free one.
    idle_timeout_s: a client connection idle this long between requests is closed. Default 60.
    io_timeout_s: bound on every wait for the peer within an exchange (connect, read, write).
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        network: NetworkProfile = NetworkProfile(),
        port: int | None = None,
        idle_timeout_s: float = 60.0,
        io_timeout_s: float = 30.0,
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
                await _within(self._server.wait_closed(), STOP_TIMEOUT_S / 3)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if self._closing or task is None:
            writer.transport.abort()
            return
        self._tasks.add(task)
        self._count("connections")
        try:
            await Connection(self, reader, writer).run()
        except asyncio.CancelledError:
            pass  # stop(): the session's finally has closed both sides
        except Exception:  # a bug in the proxy must not kill the loop; the client sees a close
            writer.transport.abort()
        finally:
            self._tasks.discard(task)

    def _count(self, name: str, n: int = 1) -> None:
        self._counters[name] += n

    def request_hook(self, method: str) -> RequestHook:
        """The hook for the next request with this (upper-case) method, called on the loop thread in
        the order request heads arrive. This proxy changes nothing; subclasses override it."""
        return _NO_HOOK

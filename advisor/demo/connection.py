"""One client connection of the emulating proxy (`advisor.demo.proxy`): the relay of its
exchanges to the upstream server, with the emulated latency and bandwidth, and the `RequestHook`
through which a subclass of the proxy changes single exchanges (`testing.faults` does)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from advisor.demo.http import (
    CHUNK_BYTES,
    FIXED,
    NONE,
    UNTIL_CLOSE,
    BadMessage,
    Closed,
    Head,
    read_body,
    read_head,
    request_body,
    response_body,
    simple_response,
)
from advisor.demo.network import NetworkProfile, TokenBucket
from advisor.demo.streams import set_linger_zero, unacked_bytes, within

__all__ = ["NO_HOOK", "STREAM_LIMIT", "Connection", "ConnectionOwner", "Request", "RequestHook"]

MAX_INTERIM_RESPONSES = 8  # 1xx responses relayed before the final one
MAX_REWRITE_BYTES = 64 * 1024 * 1024  # a body a RequestHook rewrites is read whole: this at most
MAX_REQUESTS_PER_CONNECTION = 1_000_000
STREAM_LIMIT = 2 * CHUNK_BYTES  # asyncio stream buffer limit (reading pauses above twice this)
WRITE_HIGH_WATER = 4 * CHUNK_BYTES
FLUSH_TIMEOUT_S = 1.0  # before a mid-body reset: wait this long at most for the client to ack


@dataclass(frozen=True)
class Request:
    """One request as read from the client (its head only; the body is still to be read)."""

    method: str  # upper case
    target: bytes
    close: bool  # the client asked to close the connection after this exchange
    expects_continue: bool  # `Expect: 100-continue`: the body follows only after a 100 answer
    body_mode: str  # how the body is framed: one of `advisor.demo.http`'s NONE, FIXED, CHUNKED
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

    def rewrite_body(self, status: int) -> Callable[[bytes], bytes] | None:
        """A change to a final response's whole body (one with a Content-Length, at most
        `MAX_REWRITE_BYTES`): the body is read whole, changed, and sent with the changed
        length. None: relay the body as it comes."""
        return None


NO_HOOK = RequestHook()


class ConnectionOwner(Protocol):
    """What a `Connection` needs from the proxy that accepted it (`Proxy` is one)."""

    @property
    def network(self) -> NetworkProfile: ...
    @property
    def upstream_host(self) -> str: ...
    @property
    def upstream_port(self) -> int: ...
    @property
    def idle_timeout_s(self) -> float: ...
    @property
    def io_timeout_s(self) -> float: ...

    def request_hook(self, method: str, target: bytes) -> RequestHook: ...

    def count(self, name: str, n: int = 1) -> None: ...


class Connection:
    """One client connection and its upstream connection; a `RequestHook` acts through the public
    methods (send, flush, reset, close, discard_request_body, emulate_latency)."""

    def __init__(
        self, proxy: ConnectionOwner, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.cr = reader
        self.cw = writer
        self.ur: asyncio.StreamReader | None = None
        self.uw: asyncio.StreamWriter | None = None
        rate = proxy.network.bytes_per_second
        self.bucket = TokenBucket(rate) if rate > 0 else None
        self.latency_s = proxy.network.latency_ms / 1000

    async def run(self) -> None:
        try:
            for _ in range(MAX_REQUESTS_PER_CONNECTION):
                if not await self._exchange():
                    break
        except (Closed, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            self.cw.transport.abort()
            if self.uw is not None:
                self.uw.transport.abort()

    # Writing to the client, each wait bounded by a timeout.

    async def _send(self, data: bytes) -> None:
        if self.cw.transport.is_closing():
            # the client left: stop relaying (asyncio would log every write after the loss)
            raise Closed("client closed the connection")
        self.proxy.count("bytes_to_client", len(data))  # first: the client may look at once
        self.cw.write(data)
        if self.cw.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await within(self.cw.drain(), self.proxy.io_timeout_s)

    async def _send_body(self, data: bytes) -> None:
        if self.bucket is None:
            await self._send(data)
            return
        piece = self.bucket.piece
        for start in range(0, len(data), piece):
            chunk = data[start : start + piece]
            await self.bucket.take(len(chunk))
            await self._send(chunk)

    # The exchange.

    async def _exchange(self) -> bool:
        """Relay one request and its response; whether the connection can carry another."""
        proxy = self.proxy
        try:
            raw = await read_head(self.cr, proxy.idle_timeout_s, 431)
        except asyncio.IncompleteReadError:
            return False  # the client closed between requests
        except BadMessage as e:
            await self._refuse(e)
            return False
        proxy.count("requests")
        try:
            request = Head.parse(raw, 400)
            method, target, version = request.first
            body_mode, body_length = request_body(request)
        except BadMessage as e:
            await self._refuse(e)
            return False
        close = request.wants_close(version)
        expects_continue = version == b"HTTP/1.1" and b"100-continue" in request.tokens(b"expect")
        name = method.decode("latin-1").upper()
        hook = proxy.request_hook(name, target)
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
        body = read_body(self.cr, body_mode, body_length, proxy.io_timeout_s)
        async with contextlib.aclosing(body) as chunks:
            async for data in chunks:
                self.uw.write(data)
                if self.uw.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                    await within(self.uw.drain(), proxy.io_timeout_s)
        proxy.count("forwarded")
        return await self._relay_response(method, close, hook)

    async def _relay_response(self, method: bytes, close: bool, hook: RequestHook) -> bool:
        assert self.ur is not None
        proxy = self.proxy
        latency_due = True
        for _ in range(MAX_INTERIM_RESPONSES + 1):
            try:
                raw = await read_head(self.ur, proxy.io_timeout_s, 502)
                response = Head.parse(raw, 502)
                version, code, _ = response.first
                status = int(code) if code.isdigit() and len(code) == 3 else 0
                if not version.startswith(b"HTTP/1.") or status < 100:
                    raise BadMessage(502, "malformed status line")
                mode, length = response_body(method, status, response)
            except (BadMessage, asyncio.IncompleteReadError) as e:
                bad = e if isinstance(e, BadMessage) else BadMessage(502, "upstream closed")
                await self._refuse(bad)
                return False
            proxy.count("bytes_from_upstream", len(raw))
            if status == 100:
                continue  # the proxy itself answered `Expect: 100-continue`
            if latency_due:
                latency_due = False
                await self.emulate_latency()
                await hook.before_response_head(self)
            rewrite = hook.rewrite_body(status) if status >= 200 and mode == FIXED else None
            if rewrite is not None and length <= MAX_REWRITE_BYTES:
                ok = await self._send_rewritten(raw, length, rewrite)
                return ok and not close and not response.wants_close(version)
            await self._send(raw)
            if status == 101:
                return False  # protocol switches are not relayed
            if status >= 200:
                break
        else:
            return False
        ok = await self._relay_body(mode, length, hook)
        return ok and not close and mode != UNTIL_CLOSE and not response.wants_close(version)

    async def _relay_body(self, mode: str, length: int, hook: RequestHook) -> bool:
        assert self.ur is not None
        proxy = self.proxy
        cut: int | None = None
        if mode != NONE and not (mode == FIXED and length == 0):
            cut = hook.body_cut(length if mode == FIXED else None)
        sent = 0
        body = read_body(self.ur, mode, length, proxy.io_timeout_s)
        async with contextlib.aclosing(body) as chunks:
            async for data in chunks:
                proxy.count("bytes_from_upstream", len(data))
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
        return mode != FIXED or sent == length

    async def _send_rewritten(
        self, raw: bytes, length: int, rewrite: Callable[[bytes], bytes]
    ) -> bool:
        """Read a body of `length` bytes whole, and send `raw` (the head) and the body as
        `rewrite` changed it, with its new Content-Length."""
        assert self.ur is not None
        reading = read_body(self.ur, FIXED, length, self.proxy.io_timeout_s)
        async with contextlib.aclosing(reading) as chunks:
            body = b"".join([data async for data in chunks])
        self.proxy.count("bytes_from_upstream", len(body))
        if len(body) != length:
            return False  # upstream closed early: the client sees the connection close
        body = rewrite(body)
        head = re.sub(rb"(?im)^content-length:[^\r\n]*", b"Content-Length: %d" % len(body), raw)
        await self._send(head)
        await self._send_body(body)
        return True

    # What a RequestHook may do.

    async def send(self, data: bytes) -> None:
        """Write raw bytes to the client (a whole response, or part of one)."""
        await self._send(data)

    async def discard_request_body(self, request: Request) -> None:
        """Read the request's body from the client and drop it."""
        body = read_body(self.cr, request.body_mode, request.body_length, self.proxy.io_timeout_s)
        async with contextlib.aclosing(body) as chunks:
            async for _ in chunks:
                pass

    async def emulate_latency(self) -> None:
        """Wait the network profile's latency (the proxy does this before every response head)."""
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)

    def reset(self) -> None:
        """Make the connection's coming close an RST instead of a FIN (return False after it)."""
        set_linger_zero(self.cw)

    async def close(self) -> None:
        """Close the client connection cleanly (FIN) after what was sent so far."""
        self.cw.close()
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            await within(self.cw.wait_closed(), FLUSH_TIMEOUT_S)

    async def flush(self) -> None:
        """Wait until the bytes written so far have reached the client (bounded)."""
        transport = self.cw.transport
        transport.set_write_buffer_limits(high=0)
        try:
            await within(self.cw.drain(), self.proxy.io_timeout_s)
        finally:
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while unacked_bytes(self.cw) > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)

    # The upstream side.

    async def _connect_upstream(self) -> bool:
        """Open the upstream connection, or open it again if the server closed it while idle."""
        if self.ur is not None and self.uw is not None:
            if not self.ur.at_eof() and not self.uw.is_closing():
                return True
            self.uw.transport.abort()
            self.ur = self.uw = None
        proxy = self.proxy
        try:
            self.ur, self.uw = await within(
                asyncio.open_connection(
                    proxy.upstream_host, proxy.upstream_port, limit=STREAM_LIMIT
                ),
                proxy.io_timeout_s,
            )
        except (OSError, asyncio.TimeoutError):
            await self._refuse(BadMessage(502, "upstream unreachable"))
            return False
        return True

    async def _refuse(self, error: BadMessage) -> None:
        reasons = {400: "Bad Request", 431: "Request Header Fields Too Large", 502: "Bad Gateway"}
        body = f"loader-advisor proxy: {error.reason}\n".encode()
        await self._send(simple_response(error.status, reasons[error.status], body))
        await self.flush()

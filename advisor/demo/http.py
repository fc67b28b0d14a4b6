"""HTTP/1.1 message framing for the emulating proxy (`advisor.demo.proxy`): heads and bodies.

The proxy relays messages byte for byte and parses only what it needs to know where a message
ends: the head (start line and header fields), and the body's framing (none, Content-Length,
chunked, or until the connection closes; RFC 9112 section 6). Every read is bounded by a timeout
and every line by a size limit, so a misbehaving peer cannot hold a connection forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from advisor.demo.streams import within

__all__ = [
    "CHUNKED",
    "CHUNK_BYTES",
    "FIXED",
    "NONE",
    "UNTIL_CLOSE",
    "BadMessage",
    "Closed",
    "Head",
    "read_body",
    "read_head",
    "request_body",
    "response_body",
    "simple_response",
]

MAX_HEAD_BYTES = 64 * 1024  # a larger request head is answered with 431 and the connection closed
MAX_LINE_BYTES = 8 * 1024  # a chunk-size or trailer line
CHUNK_BYTES = 1024 * 1024  # read size; large reads keep the proxy well above 300 MB/s on loopback

# How a body is framed (`Request.body_mode`): no body, Content-Length bytes, chunked, or every
# byte until the peer closes (responses only).
NONE, FIXED, CHUNKED, UNTIL_CLOSE = "none", "fixed", "chunked", "until_close"


class BadMessage(Exception):
    """A message the proxy answers with `status` (400, 431 or 502) and closes the connection."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


class Closed(Exception):
    """The exchange ended in a way that leaves the connection unusable."""


@dataclass
class Head:
    """A message head: the raw bytes, the start line's three parts, and the header fields (names
    in lower case, values stripped)."""

    raw: bytes
    first: tuple[bytes, bytes, bytes]
    headers: list[tuple[bytes, bytes]]

    @classmethod
    def parse(cls, raw: bytes, status: int) -> Head:
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2:
            raise BadMessage(status, "malformed start line")
        first = (parts[0], parts[1], parts[2] if len(parts) == 3 else b"")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise BadMessage(status, "malformed header line")
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
            raise BadMessage(status, "invalid Content-Length")
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


def request_body(head: Head) -> tuple[str, int]:
    """A request body's framing and length (the length counts only for FIXED)."""
    chunked = head.is_chunked(400)
    if chunked:
        return CHUNKED, 0
    if chunked is False:
        raise BadMessage(400, "request body length unknown (Transfer-Encoding not chunked)")
    length = head.content_length(400)
    return (FIXED, length) if length else (NONE, 0)


def response_body(method: bytes, status: int, head: Head) -> tuple[str, int]:
    """A response body's framing and length, given the request's method and the status."""
    if method == b"HEAD" or 100 <= status < 200 or status in (204, 304):
        return NONE, 0
    chunked = head.is_chunked(502)
    if chunked:
        return CHUNKED, 0
    length = head.content_length(502) if chunked is None else None
    return (UNTIL_CLOSE, 0) if length is None else (FIXED, length)


def simple_response(status: int, reason: str, body: bytes, headers: str = "") -> bytes:
    """A whole response that closes the connection."""
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n{headers}"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


async def read_head(reader: asyncio.StreamReader, timeout: float, status: int) -> bytes:
    """The raw head up to and including its empty line; `BadMessage(status)` if too large."""
    try:
        raw = await within(reader.readuntil(b"\r\n\r\n"), timeout)
    except asyncio.LimitOverrunError as e:
        raise BadMessage(status, "head too large") from e
    if len(raw) > MAX_HEAD_BYTES:
        raise BadMessage(status, "head too large")
    return raw


async def read_body(
    reader: asyncio.StreamReader, mode: str, length: int, timeout: float
) -> AsyncGenerator[bytes, None]:
    """The raw bytes of a message body (chunk framing included), each read bounded by `timeout`.
    Stops early at EOF; the caller compares with what it expected."""
    if mode == FIXED:
        remaining = length
        while remaining > 0:  # bounded: every round consumes bytes or returns
            data = await within(reader.read(min(remaining, CHUNK_BYTES)), timeout)
            if not data:
                return
            remaining -= len(data)
            yield data
    elif mode == UNTIL_CLOSE:
        # bounded by the peer's close
        while data := await within(reader.read(CHUNK_BYTES), timeout):
            yield data
    elif mode == CHUNKED:
        async for data in _chunked(reader, timeout):
            yield data


async def _chunked(reader: asyncio.StreamReader, timeout: float) -> AsyncGenerator[bytes, None]:
    while True:  # bounded: every round consumes a chunk-size line
        line = await _read_line(reader, timeout)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as e:
            raise Closed("bad chunk size") from e
        yield line
        if size == 0:
            for _ in range(MAX_HEAD_BYTES // 2):  # trailer lines, then an empty line
                line = await _read_line(reader, timeout)
                yield line
                if line == b"\r\n":
                    return
            raise Closed("too many trailer lines")
        remaining = size + 2  # data and its CRLF
        while remaining > 0:
            data = await within(reader.read(min(remaining, CHUNK_BYTES)), timeout)
            if not data:
                raise Closed("EOF inside a chunk")
            remaining -= len(data)
            yield data


async def _read_line(reader: asyncio.StreamReader, timeout: float) -> bytes:
    try:
        line = await within(reader.readuntil(b"\r\n"), timeout)
    except asyncio.LimitOverrunError as e:
        raise Closed("line too long") from e
    if len(line) > MAX_LINE_BYTES:
        raise Closed("line too long")
    return line

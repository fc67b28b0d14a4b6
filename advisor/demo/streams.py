"""asyncio stream and socket helpers for the emulating proxy: a bounded wait, an RST close, and
how much of what was written the peer has not acknowledged yet."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["set_linger_zero", "unacked_bytes", "within"]

_T = TypeVar("_T")

if sys.version_info >= (3, 11):

    async def within(awaitable: Awaitable[_T], timeout: float) -> _T:
        """`awaitable`, or TimeoutError after `timeout` seconds. Unlike 3.11's wait_for it never
        swallows a cancellation (the proxy's stop() relies on that) and starts no extra task."""
        async with asyncio.timeout(timeout):
            return await awaitable

else:

    async def within(awaitable: Awaitable[_T], timeout: float) -> _T:
        return await asyncio.wait_for(awaitable, timeout)


def set_linger_zero(writer: asyncio.StreamWriter) -> None:
    """Make the coming close send RST instead of FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def unacked_bytes(writer: asyncio.StreamWriter) -> int:
    """Bytes in the kernel send queue not yet acknowledged by the peer (0 where unknown)."""
    sock = writer.get_extra_info("socket")
    try:
        import fcntl
        import termios

        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
        return int(struct.unpack("i", raw)[0])
    except (AttributeError, ImportError, OSError, ValueError):
        return 0

"""The network the proxy emulates: its profile (latency, bandwidth) and the token bucket that
paces response bodies to the bandwidth."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

__all__ = ["NetworkProfile", "TokenBucket"]


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


class TokenBucket:
    """Paces bytes to `rate` per second with a burst of `capacity`; debt is repaid by sleeping.
    `piece` is the largest write that stays within one burst."""

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

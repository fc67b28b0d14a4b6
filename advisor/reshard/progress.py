"""Progress of a re-shard: one event type for the CLI's bar and the wizard's JSON stream."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ReshardEvent:
    """A snapshot of a running re-shard.

    kind: "listing", "wait" (a rank other than 0 waits for rank 0's plan), "plan", "cleanup"
        (leftovers of an interrupted run removed), "shard" (one committed), "skip" (already
        committed), "progress" (during a shard), "done" (this rank finished), "finalized" (index
        written).
    Counts cover this rank's shards; rates are since this rank started moving data; eta_s is
    None until one shard's worth of data has moved.
    """

    kind: str
    message: str
    shards_done: int = 0
    shards_total: int = 0
    samples_done: int = 0
    bytes_done: int = 0
    elapsed_s: float = 0.0
    samples_per_s: float = 0.0
    mb_per_s: float = 0.0
    eta_s: float | None = None
    retries: int = 0
    throttled: int = 0

    @property
    def fraction(self) -> float:
        return self.shards_done / self.shards_total if self.shards_total else 0.0

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


ProgressCallback = Callable[[ReshardEvent], None]


class Meter:
    """Counts this rank's work and turns it into events."""

    def __init__(self, callback: ProgressCallback | None, shards_total: int, bytes_total: int):
        self.callback = callback
        self.shards_total = shards_total
        self.bytes_total = bytes_total
        self.shards_done = self.samples_done = self.bytes_done = 0
        self.retries = self.throttled = 0
        self.started = time.monotonic()
        self._last_emit = 0.0

    def emit(self, kind: str, message: str, force: bool = True) -> ReshardEvent:
        now = time.monotonic()
        elapsed = max(now - self.started, 1e-9)
        rate = self.bytes_done / elapsed
        left = max(self.bytes_total - self.bytes_done, 0)
        event = ReshardEvent(
            kind=kind,
            message=message,
            shards_done=self.shards_done,
            shards_total=self.shards_total,
            samples_done=self.samples_done,
            bytes_done=self.bytes_done,
            elapsed_s=round(elapsed, 3),
            samples_per_s=round(self.samples_done / elapsed, 1),
            mb_per_s=round(rate / 1e6, 2),
            eta_s=round(left / rate, 1) if rate > 0 and self.shards_done else None,
            retries=self.retries,
            throttled=self.throttled,
        )
        if self.callback is not None and (force or now - self._last_emit >= 0.5):
            self._last_emit = now
            self.callback(event)
        return event

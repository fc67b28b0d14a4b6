"""One client run's terms, shared by every client of the reader bench: what it reads (`Spec`), what
it measured (`Measurement`), the `Feed` its timed phase draws from, and `measure`, which warms a
Python client up and times it."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from bench import own_peak_rss_mib

WARMUP_MAX_S = 1.0


@dataclass(frozen=True)
class Spec:
    """What one client run reads and how (the orchestrator writes it as JSON).

    endpoint: base URL, e.g. ``http://127.0.0.1:8333``.
    signed: sign requests with SigV4 (SeaweedFS) or send them anonymously (nginx, the proxy).
    access_key, secret_key, region: credentials and signing region (ignored when unsigned).
    bucket: bucket name; keys are addressed path-style (``endpoint/bucket/key``).
    keys: object keys; sizes: their sizes in bytes (same order).
    concurrency: the client's knob (threads, requests in flight, connections). Default 1.
    part_size: bytes per ranged GET for clients that split large objects. Default 8 MiB.
    seconds: target length of the timed phase in seconds. Default 3.
    max_objects: most objects handed out in the timed phase. Default 1,000,000.
    warmup_objects: objects read before timing (at most `WARMUP_MAX_S`). Default 0 = automatic.
    """

    endpoint: str
    signed: bool
    bucket: str
    keys: list[str]
    sizes: list[int]
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    region: str = "us-east-1"
    concurrency: int = 1
    part_size: int = 8 * 2**20
    seconds: float = 3.0
    max_objects: int = 1_000_000
    warmup_objects: int = 0

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.sizes) or not self.keys:
            raise ValueError(f"{len(self.keys)=} must equal {len(self.sizes)=} and be > 0")
        if self.concurrency < 1:
            raise ValueError(f"{self.concurrency=} must be >= 1")
        if not 0 < self.seconds <= 600:
            raise ValueError(f"{self.seconds=} must be in (0, 600] seconds")

    def url(self, key: str) -> str:
        return f"{self.endpoint}/{self.bucket}/{key}"


@dataclass(frozen=True)
class Measurement:
    """What one client run measured (printed as JSON).

    objects, bytes: read completely in the timed phase. wall_s: its wall time in seconds.
    cpu_s: user + sys CPU seconds of the client in the timed phase. peak_rss_mb: VmHWM in MiB.
    """

    client: str
    concurrency: int
    objects: int
    bytes: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    errors: int = 0
    note: str = ""


class Feed:
    """Thread-safe cycle over (key, size) until a deadline or a count; the timed phase's input."""

    def __init__(self, spec: Spec, seconds: float, max_objects: int, start: int = 0) -> None:
        self._items = list(zip(spec.keys, spec.sizes, strict=True))
        self._deadline = time.monotonic() + seconds
        self._left = max_objects
        self._next = start
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return self

    def __next__(self) -> tuple[str, int]:
        with self._lock:
            if self._left <= 0 or time.monotonic() >= self._deadline:
                raise StopIteration
            self._left -= 1
            item = self._items[self._next % len(self._items)]
            self._next += 1
            return item

    def take(self, n: int) -> list[tuple[str, int]]:
        out = []
        for item in self:
            out.append(item)
            if len(out) >= n:
                break
        return out


# A client reads everything the feed hands out and returns (objects, bytes) fully read.
Reader = Callable[[Feed], tuple[int, int]]


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_rss_mb() -> float:
    return own_peak_rss_mib() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def check_size(data_len: int, size: int, key: str) -> None:
    """Raise unless a client read the whole object: `data_len` bytes of `key`'s `size`."""
    if data_len != size:
        raise RuntimeError(f"{key}: read {data_len} bytes, expected {size}")


Maker = Callable[[Spec], tuple[Reader, Callable[[], None]]]


def measure(name: str, spec: Spec, make: Maker) -> Measurement:
    """Warm up, then time one phase of `spec.seconds`; the client's own CPU and RSS."""
    read, close = make(spec)
    try:
        warm = spec.warmup_objects or min(len(spec.keys), max(8, 2 * spec.concurrency))
        read(Feed(spec, WARMUP_MAX_S, warm, start=len(spec.keys) // 2))
        cpu0, t0 = _cpu_s(), time.perf_counter()
        objects, nbytes = read(Feed(spec, spec.seconds, spec.max_objects))
        wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    finally:
        close()
    return Measurement(name, spec.concurrency, objects, nbytes, wall, cpu, _peak_rss_mb())

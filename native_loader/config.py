"""Reader configuration and explicit credentials (frozen dataclasses, validated on creation)."""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass, field

MIN_PART_SIZE = 64 * 2**10
MAX_PART_SIZE = 5 * 2**30
_ADDRESSING_STYLES = ("auto", "path", "virtual")


@dataclass(frozen=True)
class ReaderConfig:
    """How an `S3Reader` talks to S3. Every field has a default that suits AWS S3.

    Attributes:
        endpoint_url: S3 endpoint, e.g. ``http://127.0.0.1:8333``. Default ``None``: the
            ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` environment variable, else the AWS
            endpoint of the region.
        region: signing region. Default ``None``: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the
            profile's region, else ``"us-east-1"``.
        profile: AWS profile for credentials and region. Default ``None`` (``AWS_PROFILE`` or the
            default profile).
        unsigned: send anonymous (unsigned) requests, for public buckets. Default ``False``.
        addressing_style: ``"path"`` (``host/bucket/key``), ``"virtual"`` (``bucket.host/key``)
            or ``"auto"`` (default: path for custom endpoints, virtual for AWS). Buckets that are
            not DNS labels (dots, upper case, ``_``) always use path style.
        read_ahead_bytes: bytes (B) a stream (`S3Reader.open`, `open_many`) fetches ahead of
            its consumer, in parts of ``part_size`` (at least one part; never more than
            ``max_inflight_bytes``). Default 128 MiB: 16 parts of 8 MiB in flight, the
            bandwidth-delay product of one stream at ~450 MB/s with 20 ms to first byte, 90 MB/s
            per connection and up to 0.1 s before a busy consumer takes a part and asks for the
            next (450 MB/s x (0.02 + 0.093 + 0.1 s) = 96 MB), rounded up to a power of two.
        max_inflight_requests: most HTTP requests in flight at once, and most objects
            `read_many` keeps ahead of the consumer. Default 32.
        max_inflight_bytes: bytes (B) reserved by requests in flight plus results not yet handed
            to the consumer. Default 256 MiB. The oldest unfinished read may exceed it, so one
            object larger than the budget is still read.
        part_size: bytes (B) per ranged GET; larger objects are fetched as parallel parts.
            Default 8 MiB; at least 64 KiB.
        connect_timeout_s: seconds (s) to establish a TCP/TLS connection. Default 5.
        first_byte_timeout_s: seconds (s) from sending a request to its first response byte.
            Default 30.
        stall_timeout_s: seconds (s) without a byte during a transfer before it is aborted.
            Default 30.
        max_attempts: attempts per request, first one included, for retryable failures (5xx,
            RequestTimeout, resets, truncated bodies, timeouts). Default 5. Throttling answers
            (503 SlowDown, 429, Throttling) are not counted: see ``max_throttled_s``.
        backoff_base_s: seconds (s) of the first retry delay; doubles per attempt, with jitter.
            Default 0.05.
        backoff_max_s: seconds (s) cap of one retry delay. Default 5.
        adaptive_rate: once the endpoint throttles, limit this process's request rate with a
            token bucket that is cut to 0.7x on each throttle and grows back along a cubic curve
            (the AWS SDKs' adaptive retry mode), so the prefix is kept near its allowed rate
            instead of being sent retries; the limit lifts once requests stop being throttled.
            Default ``True``.
        max_throttled_s: seconds (s) a request may go on being throttled without a break
            before it fails (``S3Error``, code ``SlowDown``, saying for how long). Default 300.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    unsigned: bool = False
    addressing_style: str = "auto"
    max_inflight_requests: int = 32
    max_inflight_bytes: int = 256 * 2**20
    part_size: int = 8 * 2**20
    read_ahead_bytes: int = 128 * 2**20
    connect_timeout_s: float = 5.0
    first_byte_timeout_s: float = 30.0
    stall_timeout_s: float = 30.0
    max_attempts: int = 5
    backoff_base_s: float = 0.05
    backoff_max_s: float = 5.0
    adaptive_rate: bool = True
    max_throttled_s: float = 300.0

    def __post_init__(self) -> None:
        problem = endpoint_problem(self.endpoint_url)
        if problem is not None:
            raise ValueError(f"{self.endpoint_url=} {problem}")
        if self.region is not None and not self.region.strip():
            raise ValueError(f"{self.region=} must be a region name such as 'us-east-1' or None")
        if self.addressing_style not in _ADDRESSING_STYLES:
            raise ValueError(f"{self.addressing_style=} must be one of {_ADDRESSING_STYLES}")
        for name in (
            "max_inflight_requests",
            "max_inflight_bytes",
            "part_size",
            "read_ahead_bytes",
            "max_attempts",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name}={value!r} must be an int")
        if not 1 <= self.max_inflight_requests <= 1024:
            raise ValueError(f"{self.max_inflight_requests=} must be between 1 and 1024")
        if not MIN_PART_SIZE <= self.part_size <= MAX_PART_SIZE:
            raise ValueError(f"{self.part_size=} must be between 64 KiB and 5 GiB")
        if self.max_inflight_bytes < self.part_size:
            raise ValueError(
                f"{self.max_inflight_bytes=} must be >= part_size ({self.part_size} B)"
            )
        if self.read_ahead_bytes < 0:
            raise ValueError(f"{self.read_ahead_bytes=} must be >= 0")
        if not 1 <= self.max_attempts <= 100:
            raise ValueError(f"{self.max_attempts=} must be between 1 and 100")
        for name in ("connect_timeout_s", "first_byte_timeout_s", "stall_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value!r} must be a positive number of seconds")
        if not (math.isfinite(self.backoff_base_s) and self.backoff_base_s >= 0):
            raise ValueError(f"{self.backoff_base_s=} must be >= 0 seconds")
        if not (math.isfinite(self.backoff_max_s) and self.backoff_max_s >= self.backoff_base_s):
            raise ValueError(f"{self.backoff_max_s=} must be >= backoff_base_s")
        if not isinstance(self.adaptive_rate, bool):
            raise TypeError(f"{self.adaptive_rate=} must be a bool")
        if not (
            isinstance(self.max_throttled_s, (int, float))
            and math.isfinite(self.max_throttled_s)
            and self.max_throttled_s >= 0
        ):
            raise ValueError(f"{self.max_throttled_s=} must be >= 0 seconds")


@dataclass(frozen=True)
class Credentials:
    """Explicit static credentials (e.g. for a local endpoint). Never part of `ReaderConfig`;
    the secret and the session token are kept out of `repr`."""

    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("Credentials need a non-empty access_key and secret_key")


def endpoint_problem(url: str | None) -> str | None:
    """What is wrong with an S3 endpoint URL, None if nothing. An endpoint is a scheme, a host
    and a port: the reader addresses buckets at its root, so a path (``http://host:9000/s3``)
    would be dropped from every request, and its listing would answer NoSuchBucket."""
    if url is None:
        return None
    if not url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return "names no host"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return (
            f"has a path ({parts.path + (('?' + parts.query) if parts.query else '')!r}): S3 "
            f"endpoints are addressed at their root; give {parts.scheme}://{parts.netloc}"
        )
    return None

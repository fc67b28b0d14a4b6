"""A job's requests against its storage's request-rate limit: the arithmetic COST-6 states and
`bench throttle` checks against an emulated limit.

The limit is per key prefix on S3 Standard (about 5,500 GET/s), per directory bucket on S3
Express (200,000 GET/s by default), or the user's figure for their endpoint
(`Workload.get_limit`, per prefix). A job asks ranks x samples/s per rank / samples per object
GET/s. Under the limit it gets what it asks; over it the storage answers 503 SlowDown and the
readers, which lower their own rate, hold THROTTLED_SHARE of the limit (`bench throttle`).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.decide.thresholds import (
    S3_EXPRESS_BUCKET_GET_LIMIT,
    S3_PREFIX_GET_LIMIT,
    THROTTLED_SHARE,
)


@dataclass(frozen=True)
class StorageLimit:
    """GET/s the storage serves before it throttles, per prefix or per bucket, and whose figure."""

    get_per_s: float
    per_prefix: bool  # False: one limit for the whole bucket (S3 Express)
    what: str  # the limit in words, e.g. "S3 Standard serves about 5,500 GET/s per prefix"
    s3_standard: bool = False  # S3 Express would serve more


def storage_get_limit(
    uri: str, endpoint_url: str | None, given: float | None = None
) -> StorageLimit | None:
    """The limit for the data at `uri`: the user's figure per prefix where they gave one; else
    an S3 Express directory bucket (its name ends in ``--x-s3``) per bucket, S3 Standard per
    prefix; None for another endpoint, whose limit is not known here."""
    if not uri.startswith("s3://"):
        return None
    if given is not None:
        return StorageLimit(given, True, f"the storage serves about {given:,.0f} GET/s per prefix "
                            "(your figure)")  # fmt: skip
    if endpoint_url:
        return None
    bucket = uri[len("s3://") :].split("/", 1)[0]
    if bucket.endswith("--x-s3"):
        return StorageLimit(
            S3_EXPRESS_BUCKET_GET_LIMIT, False,
            f"S3 Express serves about {S3_EXPRESS_BUCKET_GET_LIMIT:,} GET/s per bucket",
        )  # fmt: skip
    what = f"S3 Standard serves about {S3_PREFIX_GET_LIMIT:,} GET/s per prefix"
    return StorageLimit(S3_PREFIX_GET_LIMIT, True, what, s3_standard=True)


@dataclass(frozen=True)
class JobRequests:
    """What a job asks of the limit and what the plan says it gets (GET/s, all ranks)."""

    asked_get_per_s: float
    allowed_get_per_s: float  # the limit x the prefixes the data spreads over

    @property
    def throttled(self) -> bool:
        return self.asked_get_per_s > self.allowed_get_per_s

    @property
    def served_get_per_s(self) -> tuple[float, float]:
        """The successful GET/s the job holds: all it asks under the limit; over it, the
        readers' share of the limit (low, high)."""
        if not self.throttled:
            return self.asked_get_per_s, self.asked_get_per_s
        low, high = THROTTLED_SHARE
        return self.allowed_get_per_s * low, self.allowed_get_per_s * high


def plan_requests(
    limit: StorageLimit, *, ranks: int, samples_per_s_per_rank: float,
    samples_per_object: float = 1.0, prefixes: int = 1,
) -> JobRequests:  # fmt: skip
    """The job's GET/s against `limit`, for data spread over `prefixes` key prefixes."""
    if ranks < 1 or samples_per_s_per_rank < 0 or samples_per_object <= 0:
        raise ValueError(f"{ranks=}, {samples_per_s_per_rank=}, {samples_per_object=}")
    units = max(prefixes, 1) if limit.per_prefix else 1
    return JobRequests(
        asked_get_per_s=ranks * samples_per_s_per_rank / samples_per_object,
        allowed_get_per_s=limit.get_per_s * units,
    )

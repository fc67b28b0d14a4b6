"""Where a data set lives: an S3 URI (any S3-compatible endpoint) or a local folder.

URIs are parsed by the runtime's one parser (`native_loader.parse_uri`), the one the reader uses.
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from native_loader import Credentials, ReaderConfig, S3Reader, parse_uri
from native_loader.config import endpoint_problem

# File system types (as /proc/mounts names them) that reach their data over the network. Lustre
# is one of them; the rules tell it apart because FSx for Lustre is a data source of its own.
NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "efs", "lustre", "cifs", "smb3", "fuse.s3fs"})


# The first request to an S3 endpoint waits at most FIRST_CONTACT_ATTEMPTS x
# FIRST_CONTACT_TIMEOUT_S for an answer: an endpoint that accepts connections and never answers
# is reported in seconds, not after the reads' full bound (ReaderConfig: first_byte_timeout_s
# 30 s x max_attempts 5, about 150 s). The bound is on time, not on attempts: answers that ask
# again (5xx) are retried as every read retries them (the reader's max_attempts and backoff).
FIRST_CONTACT_TIMEOUT_S = 4.0
FIRST_CONTACT_ATTEMPTS = 2


class LocationError(ValueError):
    """A data set location that cannot be used, with a message that says how to fix it."""


@dataclass(frozen=True)
class DatasetLocation:
    """A data set: `s3://bucket/prefix/`, `file:///abs/dir` or a local path.

    endpoint_url: a custom S3 endpoint (MinIO, Ceph, a local server); None = AWS_ENDPOINT_URL or
    AWS. profile / region: as in the AWS CLI; None = the standard chain. Credentials are never
    part of a location: they are resolved from the standard chain when a reader is made.
    """

    uri: str
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    anonymous: bool = False  # unsigned requests, for a public bucket: no credentials needed

    def __post_init__(self) -> None:
        uri = self.uri.strip()
        if not uri:
            raise LocationError("empty data set URI: give s3://bucket/prefix/ or a local folder")
        try:
            scheme, bucket, _ = parse_uri(uri)
        except ValueError as exc:
            raise LocationError(str(exc)) from None
        if scheme == "s3" and not 3 <= len(bucket) <= 63:
            raise LocationError(f"invalid bucket name {bucket!r} in {uri!r} (3 to 63 characters)")
        problem = endpoint_problem(self.endpoint_url)
        if problem is not None:
            raise LocationError(f"endpoint URL {self.endpoint_url!r} {problem}")
        object.__setattr__(self, "uri", uri)

    @property
    def is_s3(self) -> bool:
        return parse_uri(self.uri)[0] == "s3"

    @property
    def storage(self) -> str:
        return "s3" if self.is_s3 else "local"

    @property
    def local_path(self) -> Path:
        if "://" not in self.uri:  # a plain path, "~" included
            return Path(self.uri)
        _, root, key = parse_uri(self.uri)
        return Path(root, key)

    def prefix_uri(self) -> str:
        """The URI to list under: S3 URIs as given, local paths absolute."""
        if self.is_s3:
            return self.uri
        path = self.local_path.expanduser().resolve()
        if not path.exists():
            raise LocationError(f"local folder {os.fspath(path)!r} does not exist")
        return os.fspath(path)

    def reader_config(self, **overrides: object) -> ReaderConfig:
        if self.anonymous:
            overrides.setdefault("unsigned", True)
        return ReaderConfig(
            endpoint_url=self.endpoint_url,
            region=self.region,
            profile=self.profile,
            **overrides,  # type: ignore[arg-type]
        )


def first_contact_s() -> float:
    """The longest `check_answers` waits for an endpoint that never answers."""
    return FIRST_CONTACT_ATTEMPTS * FIRST_CONTACT_TIMEOUT_S


def check_answers(location: DatasetLocation, credentials: Credentials | None = None) -> None:
    """Fail fast when an S3 location's endpoint accepts connections but never answers: one
    listing of one key, given up on after `first_contact_s()` (each attempt waits at most
    FIRST_CONTACT_TIMEOUT_S). Within that time it is retried as the reader retries every
    request (a 500 InternalError or 503 is asked again, up to max_attempts). Other failures
    (not found, access denied) are raised as the listing raises them."""
    if not location.is_s3:
        return
    check_reachable(location)  # an endpoint that is not there is said so before credentials
    config = location.reader_config(
        first_byte_timeout_s=FIRST_CONTACT_TIMEOUT_S, stall_timeout_s=FIRST_CONTACT_TIMEOUT_S
    )
    with S3Reader(config, credentials=credentials) as reader:
        # the deadline closes the reader, which ends the listing where it waits
        deadline = threading.Timer(first_contact_s(), reader.close)
        deadline.daemon = True
        deadline.start()
        try:
            next(iter(reader.list(location.uri, max_keys=1)), None)
        except (TimeoutError, ValueError) as exc:
            if isinstance(exc, ValueError) and not reader.closed:
                raise
            where = location.endpoint_url or "the S3 endpoint"
            raise TimeoutError(
                f"{where} accepted the connection but did not answer a listing of "
                f"{location.uri} in {FIRST_CONTACT_ATTEMPTS} x {FIRST_CONTACT_TIMEOUT_S:g} s: "
                "check that it is an S3 endpoint and that it is up"
            ) from exc
        finally:
            deadline.cancel()


def check_reachable(location: DatasetLocation, timeout_s: float = FIRST_CONTACT_TIMEOUT_S) -> None:
    """ConnectionError naming the endpoint when a custom S3 endpoint refuses or cannot be
    reached at all (a TCP connection, no credentials involved). AWS itself is not checked."""
    if not location.is_s3 or not location.endpoint_url:
        return
    parts = urllib.parse.urlsplit(location.endpoint_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConnectionError(
            f"cannot reach the endpoint {location.endpoint_url} ({reason.lower()}): check the "
            "endpoint URL and that the server is running"
        ) from exc

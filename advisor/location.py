"""Where a data set lives: an S3 URI (any S3-compatible endpoint) or a local folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from native_loader import ReaderConfig


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

    def __post_init__(self) -> None:
        uri = self.uri.strip()
        if not uri:
            raise LocationError("empty data set URI: give s3://bucket/prefix/ or a local folder")
        if "://" in uri and not uri.startswith(("s3://", "file://")):
            scheme = uri.split("://", 1)[0]
            raise LocationError(
                f"unsupported URI scheme {scheme!r} in {uri!r}: use s3://bucket/prefix/ or a path"
            )
        if uri.startswith("s3://"):
            bucket = uri[5:].split("/", 1)[0]
            if not bucket:
                raise LocationError(f"no bucket in {uri!r}: expected s3://bucket/prefix/")
            if not (3 <= len(bucket) <= 63) or not all(c.isalnum() or c in "-._" for c in bucket):
                raise LocationError(f"invalid bucket name {bucket!r} in {uri!r}")
        if self.endpoint_url is not None and not self.endpoint_url.startswith(
            ("http://", "https://")
        ):
            raise LocationError(
                f"endpoint URL {self.endpoint_url!r} must start with http:// or https://"
            )
        object.__setattr__(self, "uri", uri)

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")

    @property
    def storage(self) -> str:
        return "s3" if self.is_s3 else "local"

    @property
    def local_path(self) -> Path:
        return Path(self.uri[len("file://") :] if self.uri.startswith("file://") else self.uri)

    def prefix_uri(self) -> str:
        """The URI to list under: S3 URIs as given, local paths absolute."""
        if self.is_s3:
            return self.uri
        path = self.local_path.expanduser().resolve()
        if not path.exists():
            raise LocationError(f"local folder {os.fspath(path)!r} does not exist")
        return os.fspath(path)

    def reader_config(self, **overrides: object) -> ReaderConfig:
        return ReaderConfig(
            endpoint_url=self.endpoint_url,
            region=self.region,
            profile=self.profile,
            **overrides,  # type: ignore[arg-type]
        )

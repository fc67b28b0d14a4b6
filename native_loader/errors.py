"""S3 failures as Python built-in exceptions: one table from the engine's `ErrorKind`
(`_RAISE`), originals kept as `__cause__`.

| what happened                                    | raised                    |
|--------------------------------------------------|---------------------------|
| 404, NoSuchKey, NoSuchBucket                     | FileNotFoundError         |
| 403, AccessDenied, SignatureDoesNotMatch, ...    | PermissionError           |
| 403 RequestTimeTooSkewed (names the clock)       | ClockSkewError            |
| first-byte / stall / connect timeout             | TimeoutError              |
| endpoint unreachable, reset, truncated body      | ConnectionError           |
| any other S3 error                               | S3Error (an OSError)      |

`ClockSkewError` is a PermissionError that says how far this machine's clock is from the
storage's (`native_loader.clock`) and to sync it.

Every exception is picklable (it survives a DataLoader worker) and its message names the URI,
the S3 code and request id, never a credential or signature.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from native_loader._native import ErrorKind
from native_loader.clock import CLOCK_SKEWED, skew_words

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "NotFound", "NoSuchVersion"})
_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
    }
)


class S3Error(OSError):
    """An S3 request failed in a way no built-in exception describes.

    Attributes: ``code`` (S3 error code, e.g. ``"InvalidRange"``), ``status`` (HTTP status, 0
    when there was no response), ``request_id`` and ``uri``.
    """

    def __init__(
        self, message: str, *, code: str = "", status: int = 0, request_id: str = "", uri: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.request_id = request_id
        self.uri = uri

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_s3_error,
            (
                str(self.args[0]) if self.args else "",
                self.code,
                self.status,
                self.request_id,
                self.uri,
            ),
        )


class ClockSkewError(PermissionError):
    """The storage refused a request as signed too far from its own time (403
    ``RequestTimeTooSkewed``): this machine's clock is off. The message says by how much
    where the storage's time could be read, and to sync the clock."""


def object_changed(uri: str, why: str) -> S3Error:
    """`S3Error` with code ``ObjectChanged`` for an object (or a local file) whose parts differ
    in version, `why` saying how: its bytes would be of two versions."""
    return S3Error(
        f"{uri}: the object changed while it was read: {why}", code="ObjectChanged", uri=uri
    )


def _rebuild_s3_error(message: str, code: str, status: int, request_id: str, uri: str) -> S3Error:
    return S3Error(message, code=code, status=status, request_id=request_id, uri=uri)


@dataclass(frozen=True)
class _Failed:
    """A failed native request, as the exception builders below read it."""

    status: int
    code: str
    message: str
    request_id: str
    attempts: int
    uri: str
    unsigned: bool = False  # the request was sent unsigned on purpose (a public bucket)
    clock_offset_s: float | None = None  # this machine's clock minus the storage's, if read

    @property
    def tries(self) -> str:
        n = self.attempts
        return f" after {n} attempt{'s' if n != 1 else ''}" if n > 1 else ""


def _http_error(f: _Failed) -> BaseException:
    detail = f"{f.code} (HTTP {f.status}"
    detail += f", request id {f.request_id})" if f.request_id else ")"
    if f.message:
        detail += f": {f.message}"
    cause = S3Error(detail, code=f.code, status=f.status, request_id=f.request_id, uri=f.uri)
    exc: OSError
    if f.status == 412 or f.code == "PreconditionFailed":
        # a later part asks for the first part's ETag (If-Match): the object was overwritten
        # between its parts, and its bytes would be of two versions
        exc = object_changed(f.uri, "it was overwritten between its parts (HTTP 412); read again")
    elif f.code == CLOCK_SKEWED:
        exc = ClockSkewError(
            errno.EACCES,
            f"{skew_words(f.clock_offset_s)}, and it refuses requests signed that far from its "
            f"time: sync this machine's clock (chrony or ntpd) and retry; the storage said "
            f"{detail}",
            f.uri,
        )
    elif f.status == 404 or f.code in _NOT_FOUND_CODES:
        exc = FileNotFoundError(errno.ENOENT, detail, f.uri)
    elif f.status == 403 or f.code in _DENIED_CODES:
        if f.unsigned:
            detail += (
                "; the request was unsigned on purpose (anonymous access, for a public "
                "bucket): a private bucket needs credentials, so drop --anonymous "
                "(ReaderConfig(unsigned=False))"
            )
        exc = PermissionError(errno.EACCES, detail, f.uri)
    else:
        return S3Error(
            f"{f.uri}: {detail}{f.tries}",
            code=f.code,
            status=f.status,
            request_id=f.request_id,
            uri=f.uri,
        )
    exc.__cause__ = cause
    exc.__suppress_context__ = True
    return exc


# The one table from the engine's error kinds to exceptions.
_RAISE: dict[ErrorKind, Callable[[_Failed], BaseException]] = {
    ErrorKind.HTTP: _http_error,
    ErrorKind.TIMEOUT: lambda f: TimeoutError(errno.ETIMEDOUT, f"{f.message}{f.tries}", f.uri),
    ErrorKind.CONNECT: lambda f: ConnectionError(
        errno.ECONNREFUSED, f"cannot reach the endpoint{f.tries}: {f.message}", f.uri
    ),
    ErrorKind.NETWORK: lambda f: ConnectionError(errno.ECONNRESET, f"{f.message}{f.tries}", f.uri),
    ErrorKind.MEMORY: lambda f: MemoryError(f"{f.uri}: {f.message}"),
    ErrorKind.CLOSED: lambda f: ValueError(f"{f.uri}: the reader was closed during the request"),
    ErrorKind.PROTOCOL: lambda f: (
        object_changed(f.uri, f.message)
        if f.message.startswith("the object changed")  # the engine's words (engine_attempt.cpp)
        else S3Error(
            f"{f.uri}: {f.message}{f.tries}", code="ProtocolError", status=f.status, uri=f.uri
        )
    ),
}


def error_from_outcome(
    kind: ErrorKind,
    status: int,
    code: str,
    message: str,
    request_id: str,
    attempts: int,
    uri: str,
    *,
    unsigned: bool = False,
    clock_offset_s: float | None = None,
) -> BaseException:
    """The exception to raise for a failed native request (its `__cause__` set when useful).
    `unsigned`: the request was sent without credentials on purpose, which a refusal says.
    `clock_offset_s`: this machine's clock minus the storage's, read for a request refused as
    signed too far from the storage's time (`native_loader.clock`)."""
    failed = _Failed(status, code, message, request_id, attempts, uri, unsigned, clock_offset_s)
    return _RAISE[kind](failed)


class CredentialsError(PermissionError):
    """The AWS credentials were found but cannot be used (still expired after a refresh); the
    message names where they came from."""


class ProfileNotFoundError(ValueError):
    """The AWS profile named by ``profile=`` / ``--profile`` or ``AWS_PROFILE`` does not exist."""


@contextlib.contextmanager
def credential_errors(profile: str | None) -> Iterator[None]:
    """Turn botocore's credential-chain failures into one plain error naming the setting at fault
    (`profile` is the one asked for; None means the environment's)."""
    try:
        yield
    except Exception as exc:
        known = _credential_error(exc, profile)
        if known is None:
            raise
        raise known from exc


def _credential_error(exc: Exception, profile: str | None) -> Exception | None:
    # botocore's classes are matched by name: this module must not import botocore
    setting = "profile= / --profile" if profile else "AWS_PROFILE"
    name = profile or os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE")
    if type(exc).__name__ == "ProfileNotFound":
        name = getattr(exc, "kwargs", {}).get("profile", name)
        return ProfileNotFoundError(
            f"the AWS profile {name!r} (from {setting}) is not in the AWS config files "
            "(~/.aws/config, ~/.aws/credentials, or AWS_CONFIG_FILE / "
            "AWS_SHARED_CREDENTIALS_FILE): check the name"
        )
    if isinstance(exc, RuntimeError) and "still expired" in str(exc):
        source = f"the AWS profile {name!r} (from {setting})" if name else "the environment"
        return CredentialsError(
            f"the AWS credentials from {source} are still expired after a refresh: renew them "
            "(e.g. `aws sso login`, or fix the profile's credential_process) and retry"
        )
    return None

"""The demo's endpoint and keys in this process's standard AWS variables, while it is in use.

The user's own loader runs in the kernel (the wizard's comparison, `%advisor diagnose`) and
finds its endpoint and keys where boto3, s3fs or any AWS SDK looks: AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. `point_at(endpoint)` sets them to the demo's (and
clears a session token, which would not match its keys); `restore()` puts back what was there
before, leaving alone a variable the user has changed since. The advisor's own reads are given
the demo's credentials directly and need none of this. The keys are dummy keys of a server on
127.0.0.1, and are never printed: `NOTE` names the variables, not their values.
"""

from __future__ import annotations

import os
import sys
import threading

from advisor.demo.server import S3Endpoint

__all__ = ["NOTE", "VARIABLES", "active", "point_at", "restore"]

# set to the demo's values while the demo is in use
VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",  # beats AWS_ENDPOINT_URL for S3 where a user has set it
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)
CLEARED = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")  # a token belongs to other keys

NOTE = (
    "Your loader runs in this kernel: while the demo is in use, AWS_ENDPOINT_URL, "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY here point at the demo endpoint "
    "(put back when you choose other data)."
)

_lock = threading.Lock()
_before: dict[str, str | None] | None = None  # the values before the demo's; None: not set
_ours: dict[str, str | None] = {}  # the values set here, to leave a variable changed since


def active() -> bool:
    """True while this process's AWS variables point at the demo."""
    return _before is not None


def point_at(endpoint: S3Endpoint) -> None:
    """Point this process's AWS variables at `endpoint` (the demo's); what was there before is
    kept once, for `restore()`, however often the demo is chosen again."""
    global _before, _ours
    values: dict[str, str | None] = {
        "AWS_ENDPOINT_URL": endpoint.url,
        "AWS_ENDPOINT_URL_S3": endpoint.url,
        "AWS_ACCESS_KEY_ID": endpoint.credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": endpoint.credentials.secret_key,
        "AWS_DEFAULT_REGION": endpoint.region,
        "AWS_REGION": endpoint.region,
        **dict.fromkeys(CLEARED),
    }
    with _lock:
        if _before is None:
            _before = {name: os.environ.get(name) for name in values}
        for name, value in values.items():
            _set(name, value)
        _ours = values
    _forget_boto3_session()


def restore() -> None:
    """Put back the AWS variables as they were before `point_at` (no-op when not pointed)."""
    global _before, _ours
    with _lock:
        if _before is None:
            return
        for name, value in _before.items():
            if os.environ.get(name) == _ours.get(name):  # still ours: the user left it alone
                _set(name, value)
        _before, _ours = None, {}
    _forget_boto3_session()


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _forget_boto3_session() -> None:
    """boto3's default session keeps the credentials it first found: a loader made after the
    change must find the new ones (only where the user's code has imported boto3)."""
    boto3 = sys.modules.get("boto3")
    if boto3 is not None:
        boto3.DEFAULT_SESSION = None  # type: ignore[attr-defined]

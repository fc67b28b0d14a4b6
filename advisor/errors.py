"""One place that turns any engine error into one plain sentence for the CLI and the wizard."""

from __future__ import annotations

import re

# Anything that looks like a secret never reaches a user-facing message.
_SECRETS = re.compile(
    r"(Signature=|Credential=|X-Amz-Security-Token=|aws_secret_access_key\s*=\s*)[^\s&,]+", re.I
)


def redact(text: str) -> str:
    return _SECRETS.sub(r"\1<redacted>", text)


def describe(exc: BaseException) -> str:
    """A one-line explanation of `exc` in plain words, naming what to check."""
    text = redact(str(exc)).strip().splitlines()[0] if str(exc).strip() else ""
    kind = type(exc).__name__
    if isinstance(exc, PermissionError):
        return f"access denied: {text or 'the credentials may not read this data'}"
    if isinstance(exc, FileNotFoundError):
        return f"not found: {text}" if text else "not found: check the bucket, prefix or folder"
    if isinstance(exc, TimeoutError):
        return f"timed out: {text or 'the endpoint did not answer in time'}"
    if isinstance(exc, ConnectionError):
        return f"cannot reach the endpoint: {text}" if text else "cannot reach the endpoint"
    if isinstance(exc, ValueError):
        return f"invalid input: {text}"
    return f"{kind}: {text}" if text else kind

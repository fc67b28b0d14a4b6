"""One place that turns any engine error into one plain sentence for the CLI and the wizard."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable

from native_loader.errors import ClockSkewError
from native_loader.sample_errors import SampleError
from native_loader.worker_death import WorkerDied

# The CLIs' exit statuses: bad input, a storage or runtime problem, Ctrl-C (128 + SIGINT).
EXIT_INPUT, EXIT_RUNTIME, EXIT_INTERRUPTED = 2, 1, 130

# Anything that looks like a secret never reaches a user-facing message.
_SECRETS = re.compile(
    r"(Signature=|Credential=|X-Amz-Security-Token=|aws_secret_access_key\s*=\s*)[^\s&,]+", re.I
)


def redact(text: str) -> str:
    return _SECRETS.sub(r"\1<redacted>", text)


def describe(exc: BaseException) -> str:
    """A one-line explanation of `exc` in plain words, naming what to check."""
    lines = redact(str(exc)).strip().splitlines()
    text = _ERRNO.sub("", _original(lines)) if lines else ""
    if isinstance(exc, (SampleError, ClockSkewError, WorkerDied)):
        return text  # it names the cause and the fix in the user's words
    if isinstance(exc, PermissionError) and text.startswith(_NO_CREDENTIALS):
        return NO_CREDENTIALS_HELP
    if isinstance(exc, PermissionError):
        return _lead("access denied", text or "the credentials may not read this data")
    if isinstance(exc, FileNotFoundError):
        return _lead("not found", text or "check the bucket, prefix or folder")
    if isinstance(exc, TimeoutError):
        return _lead("timed out", text or "the endpoint did not answer in time")
    if isinstance(exc, ConnectionError):
        return _lead("cannot reach the endpoint", text)
    if isinstance(exc, ValueError):
        return _lead("invalid input", text)
    kind = type(exc).__name__
    return f"{kind}: {text}" if text else kind


_ERRNO = re.compile(r"^\[Errno -?\d+\] ")
_NO_CREDENTIALS = "no AWS credentials found"  # the reader's words when the chain is empty
NO_CREDENTIALS_HELP = (
    "no AWS credentials found: set AWS_PROFILE (or the AWS profile field, --profile on the "
    "command line), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; for a public bucket, "
    "choose anonymous access"
)
# A DataLoader worker's exception is raised again in the training process as
# "Caught X in DataLoader worker process N.\nOriginal Traceback ...\nmodule.X: message".
_WORKER = re.compile(r"^Caught \w+ in DataLoader worker process \d+\.$")
_RAISED = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*: (.*)$")


def _original(lines: list[str]) -> str:
    """The message line: the first, or, for a DataLoader worker's exception, the original one
    at the end of the worker's traceback (the first line names no object)."""
    if not _WORKER.match(lines[0]):
        return lines[0]
    for line in reversed(lines[1:]):
        match = _RAISED.match(line.strip())
        if match and not line.startswith(" "):
            return match.group(1)
    return lines[0]


def report_error(exc: BaseException) -> int:
    """Print `exc` as the CLIs' one error line on stderr; the exit status it calls for."""
    print(f"error: {describe(exc)}", file=sys.stderr)
    return EXIT_INPUT if isinstance(exc, (ValueError, TypeError)) else EXIT_RUNTIME


class CommandErrors:
    """How every CLI command ends when its work fails: `with CommandErrors(...) as failed:` runs
    the work; after it, `failed.code` is None when the work finished, else the exit status,
    with one `error:` line on stderr and no traceback. Ctrl-C sets `cancel` (the work's
    threads stop) and is EXIT_INTERRUPTED with `interrupted` said; bad input (ValueError,
    TypeError), storage or OS failures and a DataLoader worker's death go through
    `report_error`; the exception types in
    `own` are said as they are (their message is written for the user) with EXIT_RUNTIME.
    `finish` runs however the work ends (a progress line to close)."""

    def __init__(
        self,
        *,
        cancel: threading.Event | None = None,
        finish: Callable[[], None] | None = None,
        interrupted: str = "interrupted",
        own: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.cancel, self.finish, self.interrupted, self.own = cancel, finish, interrupted, own
        self.code: int | None = None

    def __enter__(self) -> CommandErrors:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, KeyboardInterrupt) and self.cancel is not None:
            self.cancel.set()
        if self.finish is not None:
            self.finish()
        if exc is None:
            return False
        if isinstance(exc, KeyboardInterrupt):
            print(f"error: {self.interrupted}", file=sys.stderr)
            self.code = EXIT_INTERRUPTED
        elif self.own and isinstance(exc, self.own):
            print(f"error: {exc}", file=sys.stderr)
            self.code = EXIT_RUNTIME
        elif isinstance(exc, (ValueError, TypeError, OSError, WorkerDied)):
            self.code = report_error(exc)
        else:
            return False
        return True


def _lead(what: str, text: str) -> str:
    """`what: text`, without saying `what` twice when the text already starts with it."""
    if not text:
        return what
    return text if text.lower().startswith(what) else f"{what}: {text}"

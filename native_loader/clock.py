"""How far this machine's clock is from a storage's, for the error that says so.

S3 refuses a request signed more than 15 minutes from its own time (403
``RequestTimeTooSkewed``) and its error's message says neither by how much nor whose clock is
wrong. Every S3 answer carries the storage's time in its ``Date`` header, so one unsigned HEAD
of the endpoint's root, answered with anything, says it (to the second). Asked only once a
request was refused for it: no request pays for it otherwise.
"""

from __future__ import annotations

import email.utils
import http.client
import os
import ssl
import time
import urllib.parse

CLOCK_SKEWED = "RequestTimeTooSkewed"  # S3's code for a request signed too far from its time
PROBE_TIMEOUT_S = 5.0


def clock_offset_s(endpoint_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> float | None:
    """This machine's clock minus the storage's at `endpoint_url`, in seconds (positive: this
    machine is ahead), from the ``Date`` of one HEAD of its root; None when it cannot be read
    (no answer, no Date). TLS trusts the system's store or ``AWS_CA_BUNDLE``."""
    parts = urllib.parse.urlsplit(endpoint_url)
    if not parts.hostname:
        return None
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=os.environ.get("AWS_CA_BUNDLE") or None)
        connection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=context
        )
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        connection.request("HEAD", "/")
        asked = time.time()
        date = connection.getresponse().getheader("Date")
        answered = time.time()
    except (OSError, http.client.HTTPException, ssl.SSLError):
        return None
    finally:
        connection.close()
    if not date:
        return None
    try:
        theirs = email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return None
    return (asked + answered) / 2 - theirs


def skew_words(offset_s: float | None) -> str:
    """``this machine's clock is 20 minutes ahead of the storage's`` (or behind); for an
    offset under a minute, or not known, that it is too far off for the storage."""
    if offset_s is None or abs(offset_s) < 60:
        return "this machine's clock is too far off the storage's for it (S3 allows 15 minutes)"
    minutes = abs(offset_s) / 60
    amount = f"{minutes:.0f} minutes" if minutes < 120 else f"{minutes / 60:.1f} hours"
    where = "ahead of" if offset_s > 0 else "behind"
    return f"this machine's clock is {amount} {where} the storage's"

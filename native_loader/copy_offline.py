"""A complete local copy read while its endpoint is gone, for loaders that ask for it (an
export of the Loader Advisor demo's data: the demo ends with the kernel that started it, and its
data never changes, so the copy checked against its listing last time is still it).

The endpoint is gone when it refuses the connection, or when it cannot be asked (no keys: the
demo's were the kernel's) and nothing answers where it was. Only a copy that was finished
(``_complete``), of the same bucket and prefix, with every file its manifest lists there at its
listed size is read; anything less is no copy to read offline.
"""

from __future__ import annotations

import json
import os
import socket
from urllib.parse import urlsplit

from native_loader.copy_layout import copy_path
from native_loader.local_copy import COMPLETE, MANIFEST, SOURCE, CopySource
from native_loader.uri import parse_uri


def offline_copy(uri: str, directory: str | os.PathLike[str]) -> str | None:
    """Words for the complete copy of `uri` in `directory` ("the local copy in D: 2,000
    objects, 241.2 MiB, as checked against s3://b/p on http://..."); None when there is none
    to read without its endpoint."""
    root = os.path.expanduser(os.fspath(directory))
    _, bucket, prefix = parse_uri(uri)
    try:
        with open(os.path.join(root, SOURCE)) as f:
            source = CopySource(**json.load(f))
        with open(os.path.join(root, MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError, TypeError):
        return None
    if (source.bucket, source.prefix) != (bucket, prefix) or not isinstance(manifest, dict):
        return None
    if not manifest or not os.path.exists(os.path.join(root, COMPLETE)):
        return None
    try:
        sizes = [(copy_path(root, prefix, key), int(entry[0])) for key, entry in manifest.items()]
        if any(os.stat(path).st_size != size for path, size in sizes):
            return None
    except (OSError, ValueError, TypeError, IndexError):
        return None  # a file missing, or a manifest this version does not read
    total = sum(size for _, size in sizes)
    return (
        f"the local copy in {directory}: {len(manifest):,} objects, {total / 2**20:,.1f} MiB, "
        f"as last checked against {source}"
    )


def gone(endpoint_url: str | None, exc: BaseException) -> bool:
    """True when `exc` (a failed listing) says the endpoint at `endpoint_url` is not there: it
    could not be reached, or it could not be asked and nothing answers there."""
    if isinstance(exc, ConnectionError):
        return True
    return isinstance(exc, PermissionError) and not answers(endpoint_url)


def answers(url: str | None) -> bool:
    """True when something accepts a connection where `url` points."""
    parts = urlsplit(url or "")
    try:
        socket.create_connection((parts.hostname, parts.port or 80), timeout=2).close()
    except OSError:
        return False
    return True

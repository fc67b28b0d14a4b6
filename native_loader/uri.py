"""URI parsing: ``s3://bucket/key``, ``file:///abs/path``, ``/abs/path``, ``relative/path``."""

from __future__ import annotations

import os
import urllib.parse


def uri_scheme(uri: str) -> str:
    """The lower-cased scheme of `uri` ("s3", "nfs", ...); "file" for a plain path. No checks."""
    scheme, sep, _ = uri.partition("://")
    return scheme.lower() if sep else "file"


def is_metadata(uri: str, under: str) -> bool:
    """Hadoop's and Spark's rule for input files: below `under` (the listed prefix or folder), a
    name or folder starting with ``_`` or ``.`` is metadata, not data (``_SUCCESS``,
    ``.DS_Store``, a re-shard's ``_reshard/``). The profile and the datasets both skip it; only
    the part below `under` counts (data under ``~/.cache/`` is data)."""
    try:
        _, root, key = parse_uri(uri)
        _, under_root, under_key = parse_uri(under)
    except ValueError:
        return False
    if root != under_root or not key.startswith(under_key):
        return False
    return any(part[:1] in ("_", ".") for part in key[len(under_key) :].split("/") if part)


def parse_uri(uri: str) -> tuple[str, str, str]:
    """Split a URI into ``(scheme, bucket_or_root, key)``.

    ``s3://bucket/a/b`` -> ``("s3", "bucket", "a/b")`` (the key may be empty or a prefix);
    local paths -> ``("file", "/", "abs/path")``, relative paths made absolute, ``file://`` URIs
    percent-decoded. Raises ValueError with the reason for anything else.
    """
    if not isinstance(uri, str):
        raise TypeError(f"uri must be a str, not {type(uri).__name__}")
    if not uri:
        raise ValueError("empty URI")
    scheme, rest = uri_scheme(uri), uri.partition("://")[2]
    if "://" not in uri:
        return _local(uri)
    if scheme == "s3":
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ValueError(f"{uri!r} has no bucket name (expected s3://bucket/key)")
        if any(c.isspace() for c in bucket) or not all(c.isalnum() or c in ".-_" for c in bucket):
            raise ValueError(f"invalid bucket name {bucket!r} in {uri!r}")
        return ("s3", bucket, key)
    if scheme == "file":
        host, slash, path = rest.partition("/")
        if host not in ("", "localhost"):
            raise ValueError(f"{uri!r}: file URIs on another host ({host!r}) are not supported")
        if not slash:
            raise ValueError(f"{uri!r} has no path (expected file:///abs/path)")
        return _local("/" + urllib.parse.unquote(path))
    raise ValueError(f"unsupported URI scheme {scheme!r} in {uri!r} (use s3://, file:// or a path)")


def _local(path: str) -> tuple[str, str, str]:
    absolute = os.path.abspath(path)
    if path.endswith("/") and not absolute.endswith("/"):
        absolute += "/"  # keep the "directory" meaning of a trailing slash for listing
    return ("file", "/", absolute.lstrip("/"))


def local_path(root: str, key: str) -> str:
    """The filesystem path of a ``("file", root, key)`` triple. A name that is not UTF-8 (listed
    with surrogate escapes) cannot cross to the native reader: refused here, named, for every
    way a reader opens a local file."""
    path = os.path.join(root, key)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise ValueError(
            f"reading {shown} failed: its file name is not valid UTF-8; rename the file"
        ) from None
    return path

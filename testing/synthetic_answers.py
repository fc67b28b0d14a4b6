"""The synthetic S3 endpoint's answers: `answer` turns one request (method, target, headers) into
the `Response` S3 would give for a `Keyspace` (ListObjectsV2, HEAD and GET of an object, errors);
no I/O."""

from __future__ import annotations

import bisect
import re
import urllib.parse
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from testing.synthetic_keyspace import Keyspace

MAX_KEYS = 1000  # S3's page limit
LAST_MODIFIED = "2026-01-01T00:00:00.000Z"
LAST_MODIFIED_HTTP = "Thu, 01 Jan 2026 00:00:00 GMT"
_AFTER_EVERY_KEY = "\U0010ffff"  # sorts after any character a key holds: the end of a prefix
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


@dataclass(frozen=True)
class _Keys:
    """The keys as a sorted sequence, for `bisect`."""

    space: Keyspace

    def __len__(self) -> int:
        return self.space.count

    def __getitem__(self, index: int) -> str:
        return self.space.key(index)


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    head_only: bool = False  # HEAD: Content-Length says the body's length; no body is sent


def s3_error(status: int, code: str, message: str, resource: str) -> Response:
    """S3's XML error document for `resource`, with `status` and the error's `code`."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
        f"<Code>{code}</Code><Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource><RequestId>synthetic</RequestId></Error>"
    ).encode()
    return Response(status, {"Content-Type": "application/xml"}, body)


def answer(space: Keyspace, method: str, target: str, headers: dict[str, str]) -> Response:
    """The response to one request (`headers` with lower-case names)."""
    parts = urllib.parse.urlsplit(target)
    path = urllib.parse.unquote(parts.path)
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    bucket, _, key = path.lstrip("/").partition("/")
    if bucket != space.bucket:
        return s3_error(404, "NoSuchBucket", "the synthetic endpoint has one bucket", path)
    if method not in ("GET", "HEAD"):
        return s3_error(
            405, "MethodNotAllowed", f"{method}: the synthetic bucket is read-only", path
        )
    if not key:
        if method == "HEAD":
            return Response(200, {"x-amz-bucket-region": "us-east-1"})
        if "location" in query:
            return Response(200, {"Content-Type": "application/xml"}, b"<LocationConstraint/>")
        if query.get("list-type") != "2":
            return s3_error(501, "NotImplemented", "only ListObjectsV2 (list-type=2)", path)
        return _list(space, query, path)
    return _object(space, method, key, headers, path)


def _list(space: Keyspace, query: dict[str, str], path: str) -> Response:
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    try:
        max_keys = min(int(query.get("max-keys", MAX_KEYS)), MAX_KEYS)
        token = query.get("continuation-token")
        position = int(token) if token is not None else None
    except ValueError:
        return s3_error(400, "InvalidArgument", "max-keys and continuation-token: integers", path)
    if max_keys < 0 or (position is not None and not 0 <= position <= space.count):
        return s3_error(400, "InvalidArgument", "max-keys or continuation-token out of range", path)
    keys = _Keys(space)
    start = bisect.bisect_left(keys, prefix)
    end = bisect.bisect_left(keys, prefix + _AFTER_EVERY_KEY, start) if prefix else len(keys)
    if position is not None:
        start = max(start, position)
    elif query.get("start-after"):
        start = max(start, bisect.bisect_right(keys, query["start-after"]))
    contents: list[str] = []
    prefixes: list[str] = []
    i = start
    while i < end and len(contents) + len(prefixes) < max_keys:
        key = keys[i]
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        if cut < 0:
            contents.append(key)
            i += 1
            continue
        common = key[: cut + len(delimiter)]
        prefixes.append(common)
        i = bisect.bisect_left(keys, common + _AFTER_EVERY_KEY, i, end)
    truncated = i < end
    out = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_NS}">'
        f"<Name>{space.bucket}</Name><Prefix>{escape(prefix)}</Prefix>"
        f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
    ]
    if delimiter:
        out.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
    if query.get("encoding-type") == "url":  # keys are quoted as S3 does (ours need none)
        out.append("<EncodingType>url</EncodingType>")
    if token is not None:
        out.append(f"<ContinuationToken>{token}</ContinuationToken>")
    if query.get("start-after"):
        out.append(f"<StartAfter>{escape(query['start-after'])}</StartAfter>")
    if truncated:
        out.append(f"<NextContinuationToken>{i}</NextContinuationToken>")
    md5 = space.md5
    out += [
        f"<Contents><Key>{escape(key)}</Key><LastModified>{LAST_MODIFIED}</LastModified>"
        f"<ETag>&quot;{md5(key)}&quot;</ETag><Size>{space.size}</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
        for key in contents
    ]
    out += [f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes]
    out.append("</ListBucketResult>")
    return Response(200, {"Content-Type": "application/xml"}, "".join(out).encode())


def _object(space: Keyspace, method: str, key: str, headers: dict[str, str], path: str) -> Response:
    if space.index(key) is None:
        if method == "HEAD":
            return Response(404, head_only=True)
        return s3_error(404, "NoSuchKey", "no such key in the synthetic bucket", path)
    etag = space.etag(key)
    base = {
        "ETag": etag,
        "Last-Modified": LAST_MODIFIED_HTTP,
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
    }
    if headers.get("if-match", etag) not in (etag, "*"):
        return s3_error(412, "PreconditionFailed", "If-Match: the ETag differs", path)
    body, status = space.body(key), 200
    wanted = headers.get("range")
    if wanted is not None:
        match = _RANGE.match(wanted.strip())
        first, last = (match.group(1), match.group(2)) if match else ("", "")
        if match and (first or last):
            if not first:  # bytes=-n: the last n bytes
                first, last = str(max(space.size - int(last), 0)), str(space.size - 1)
            begin, stop = int(first), min(int(last or space.size - 1), space.size - 1)
            if begin >= space.size or stop < begin:
                unsatisfied = s3_error(
                    416, "InvalidRange", f"{wanted}: not within the object", path
                )
                unsatisfied.headers["Content-Range"] = f"bytes */{space.size}"
                return unsatisfied
            body, status = body[begin : stop + 1], 206
            base["Content-Range"] = f"bytes {begin}-{stop}/{space.size}"
    return Response(status, base, body, head_only=method == "HEAD")

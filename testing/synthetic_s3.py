"""A synthetic S3 endpoint: one bucket whose keys are computed, not stored.

    with SyntheticS3(Keyspace(count=1_000_000, size=1024)) as s3:   # s3://synth/train/...
        client = s3.boto3_client()                                 # or env=s3.env() for a child
        body = client.get_object(Bucket="synth", Key=s3.space.key(7))["Body"].read()
        assert body == s3.space.body(s3.space.key(7))

Key i is `{prefix}{i:08d}{suffix}` (wider where the count needs it, so that key order is index
order), every object is `size` bytes, its body is the key and `SEPARATOR` repeated (a reader
checks what it read with `Keyspace.body`; binary, as an encoded sample is) and its ETag the
key's MD5.
The server answers ListObjectsV2 (prefix, delimiter, max-keys up to 1000, continuation-token,
start-after, encoding-type), HEAD and GET of an object (one Range, If-Match) and HEAD of the
bucket, over HTTP/1.1 with keep-alive on 127.0.0.1; it accepts any signature or none. It runs in
a process of its own (`python -m testing.synthetic_s3`), so that its interpreter's GIL and CPU are
not the measured client's: a page of 1,000 keys costs it a few milliseconds (`python -m bench
scale` reports its CPU time beside each figure), so a listing's time is the client's.

Test infrastructure: not part of the installed package.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import email.utils
import functools
import hashlib
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

HOST = "127.0.0.1"
MAX_KEYS = 1000  # S3's page limit
LAST_MODIFIED = "2026-01-01T00:00:00.000Z"
LAST_MODIFIED_HTTP = "Thu, 01 Jan 2026 00:00:00 GMT"
IDLE_TIMEOUT_S = 120.0  # a keep-alive connection with no request for this long is closed
MAX_HEAD_BYTES = 64 * 1024
MAX_REQUEST_BODY = 1024 * 1024  # a body sent to this read-only server is read and dropped
_AFTER_EVERY_KEY = "\U0010ffff"  # sorts after any character a key holds: the end of a prefix
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
SEPARATOR = b"\x00\xff"  # ends the key in a body; 0xff is never UTF-8: the body is not text


@dataclass(frozen=True)
class Keyspace:
    """The bucket's contents. bucket: its name. prefix: what every key starts with. count: the
    number of keys (>= 0). size: bytes (B) of every object (>= 0). suffix: what every key ends
    with."""

    bucket: str = "synth"
    prefix: str = "train/"
    count: int = 1_000_000
    size: int = 1024
    suffix: str = ".bin"

    def __post_init__(self) -> None:
        if self.count < 0 or self.size < 0:
            raise ValueError(f"{self.count=} and {self.size=} must be >= 0")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", self.bucket):
            raise ValueError(f"{self.bucket=} is not a bucket name")
        if any(c.isdigit() for c in self.suffix[:1]):
            raise ValueError(f"{self.suffix=} may not start with a digit (key order = index order)")

    @functools.cached_property
    def width(self) -> int:  # computed once: every key of every page is formatted with it
        return max(8, len(str(max(self.count - 1, 0))))

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, index: int) -> str:
        return f"{self.prefix}{index:0{self.width}d}{self.suffix}"

    def index(self, key: str) -> int | None:
        """The index of `key`, None where it is not one of the bucket's keys."""
        digits = key[len(self.prefix) : len(key) - len(self.suffix)]
        if (
            not key.startswith(self.prefix)
            or not key.endswith(self.suffix)
            or len(digits) != self.width
            or not digits.isdigit()
        ):
            return None
        index = int(digits)
        return index if index < self.count else None

    def body(self, key: str) -> bytes:
        """The key, then bytes that no text holds (so that it profiles as binary), repeated."""
        seed = key.encode() + SEPARATOR
        return (seed * (self.size // len(seed) + 1))[: self.size]

    def md5(self, key: str) -> str:
        """The MD5 of the key: hashing each body would cost a page of 1,000 keys ~5 ms of the
        server's CPU, a third of the native reader's time for it (S3's ETag is the body's MD5
        only for single-part uploads; no client checks it against the body)."""
        return hashlib.md5(key.encode()).hexdigest()

    def etag(self, key: str) -> str:
        """The ETag header's value: `md5` in double quotes."""
        return f'"{self.md5(key)}"'


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


def _error(status: int, code: str, message: str, resource: str) -> Response:
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
        return _error(404, "NoSuchBucket", "the synthetic endpoint has one bucket", path)
    if method not in ("GET", "HEAD"):
        return _error(405, "MethodNotAllowed", f"{method}: the synthetic bucket is read-only", path)
    if not key:
        if method == "HEAD":
            return Response(200, {"x-amz-bucket-region": "us-east-1"})
        if "location" in query:
            return Response(200, {"Content-Type": "application/xml"}, b"<LocationConstraint/>")
        if query.get("list-type") != "2":
            return _error(501, "NotImplemented", "only ListObjectsV2 (list-type=2)", path)
        return _list(space, query, path)
    return _object(space, method, key, headers, path)


def _list(space: Keyspace, query: dict[str, str], path: str) -> Response:
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    try:
        max_keys = min(int(query.get("max-keys", MAX_KEYS)), MAX_KEYS)
        token = query.get("continuation-token")
        position = int(token) if token is not None else None
    except ValueError:
        return _error(400, "InvalidArgument", "max-keys and continuation-token: integers", path)
    if max_keys < 0 or (position is not None and not 0 <= position <= space.count):
        return _error(400, "InvalidArgument", "max-keys or continuation-token out of range", path)
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
        return _error(404, "NoSuchKey", "no such key in the synthetic bucket", path)
    etag = space.etag(key)
    base = {
        "ETag": etag,
        "Last-Modified": LAST_MODIFIED_HTTP,
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
    }
    if headers.get("if-match", etag) not in (etag, "*"):
        return _error(412, "PreconditionFailed", "If-Match: the ETag differs", path)
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
                unsatisfied = _error(416, "InvalidRange", f"{wanted}: not within the object", path)
                unsatisfied.headers["Content-Range"] = f"bytes */{space.size}"
                return unsatisfied
            body, status = body[begin : stop + 1], 206
            base["Content-Range"] = f"bytes {begin}-{stop}/{space.size}"
    return Response(status, base, body, head_only=method == "HEAD")


_REASONS = {
    200: "OK", 206: "Partial Content", 400: "Bad Request", 404: "Not Found",
    405: "Method Not Allowed", 412: "Precondition Failed", 416: "Range Not Satisfiable",
    501: "Not Implemented",
}  # fmt: skip


def _encode(response: Response, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}"]
    headers = {
        "Date": email.utils.formatdate(usegmt=True),
        "Server": "synthetic-s3",
        "x-amz-request-id": "synthetic",
        **response.headers,
        "Content-Length": str(len(response.body)),
        "Connection": "keep-alive" if keep_alive else "close",
    }
    lines += [f"{name}: {value}" for name, value in headers.items()]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if response.head_only else head + response.body


async def _serve_connection(
    space: Keyspace, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
            request, *header_lines = raw.decode("latin-1").split("\r\n")
            method, target, version = request.split(" ", 2)
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                if name:
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if length > MAX_REQUEST_BODY or "transfer-encoding" in headers:
                writer.write(_encode(_error(400, "BadRequest", "no bodies", target), False))
                break
            if length:
                await asyncio.wait_for(reader.readexactly(length), IDLE_TIMEOUT_S)
            close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
            writer.write(_encode(answer(space, method.upper(), target, headers), not close))
            await writer.drain()
            if close:
                break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    except (asyncio.TimeoutError, ValueError):  # idle, or a head that is not HTTP
        pass
    finally:
        writer.close()


async def _serve(space: Keyspace, port: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(space, r, w),
        HOST, port, limit=MAX_HEAD_BYTES, backlog=1024, reuse_address=True,
    )  # fmt: skip
    bound = server.sockets[0].getsockname()[1]
    print(f"listening http://{HOST}:{bound}", flush=True)  # what SyntheticS3 waits for
    async with server:
        await server.serve_forever()


class SyntheticS3:
    """The endpoint's process, from `__enter__` (listening, or RuntimeError within
    `start_timeout_s`) to `__exit__` (stopped). The server binds a free port itself (port 0) and
    says which: no other program can take it between the choice and the bind. `url`: the
    endpoint; `pid`: the server's process (its CPU time is the server's load)."""

    def __init__(self, space: Keyspace | None = None, *, start_timeout_s: float = 10.0) -> None:
        self.space = space or Keyspace()
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        # the server's stderr, kept as long as the server runs (a pipe nobody reads would fill)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self.url = ""

    @property
    def pid(self) -> int:
        assert self._process is not None, "the endpoint is not started"
        return self._process.pid

    def env(self) -> dict[str, str]:
        """A child's environment for this endpoint: its URL and dummy credentials (the server
        checks no signature), nothing of this process's AWS settings."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return base | {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "synthetic",
            "AWS_SECRET_ACCESS_KEY": "synthetic",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def boto3_client(self, **config: Any) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="synthetic", aws_secret_access_key="synthetic",
            config=Config(max_pool_connections=32, **config),
        )  # fmt: skip

    def __enter__(self) -> SyntheticS3:
        # here, not at the top: the measured probe imports this module for SEPARATOR alone
        from advisor.demo.server import die_with_parent

        s = self.space
        command = [
            sys.executable, "-m", "testing.synthetic_s3", "--bucket", s.bucket, "--prefix",
            s.prefix, "--keys", str(s.count), "--size", str(s.size), "--suffix", s.suffix,
        ]  # fmt: skip
        parent = os.getpid()
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._log,
            cwd=Path(__file__).resolve().parent.parent,
            preexec_fn=lambda: die_with_parent(parent),
        )  # fmt: skip
        try:
            self.url = self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> str:
        process = self._process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        line = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    waited = f"{self.start_timeout_s:g} s"
                    raise RuntimeError(f"the synthetic S3 server did not listen within {waited}: "
                                       f"{self._log_tail()}")  # fmt: skip
                chunk = os.read(process.stdout.fileno(), 256)
                if not chunk:
                    raise RuntimeError(f"the synthetic S3 server exited ({process.wait(5)}) "
                                       f"before listening: {self._log_tail()}")  # fmt: skip
                line += chunk
        return line.decode().split()[-1]

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace").strip() or "(nothing on stderr)"

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            if process.stdout is not None:
                process.stdout.close()
        self._log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testing.synthetic_s3", description=__doc__)
    parser.add_argument("--bucket", default="synth")
    parser.add_argument("--prefix", default="train/")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024, help="bytes of every object")
    parser.add_argument("--suffix", default=".bin")
    parser.add_argument("--port", type=int, default=0, help="default: a free one, printed")
    args = parser.parse_args(argv)
    space = Keyspace(args.bucket, args.prefix, args.keys, args.size, args.suffix)
    asyncio.run(_serve(space, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())

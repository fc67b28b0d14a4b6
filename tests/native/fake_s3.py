"""A small S3 on 127.0.0.1 serving a dict of objects: ListObjectsV2 pages, ranged GETs and HEADs.

For what the session's SeaweedFS cannot hold or do: a key ending in ``/`` with bytes (SeaweedFS
makes it a folder and drops the bytes), and listing pages that overlap (a server whose
continuation token starts the next page at the last key it sent, not after it). It checks no
signature; it sits outside the code under test like the fault proxy.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from xml.sax.saxutils import escape

from native_loader import Credentials, ReaderConfig

__all__ = ["FakeS3", "fake_s3", "fake_s3_config"]


class FakeS3(http.server.ThreadingHTTPServer):
    """Objects of one bucket; `overlap`: each page after the first repeats the last key of the
    one before it."""

    daemon_threads = True

    def __init__(self, bucket: str, objects: dict[str, bytes], *, overlap: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bucket = bucket
        self.objects = dict(objects)
        self.overlap = overlap
        self.list_requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def page(self, query: dict[str, str]) -> bytes:
        prefix = query.get("prefix", "")
        token = query.get("continuation-token", "")
        max_keys = int(query.get("max-keys", "1000"))
        keys = sorted(k for k in self.objects if k.startswith(prefix))
        if token:
            keys = [k for k in keys if (k >= token if self.overlap else k > token)]
        shown, truncated = keys[:max_keys], len(keys) > max_keys
        url = query.get("encoding-type") == "url"

        def key_text(key: str) -> str:
            return urllib.parse.quote(key, safe="/") if url else escape(key)

        contents = "".join(
            f"<Contents><Key>{key_text(k)}</Key><ETag>&quot;{_etag(self.objects[k])}&quot;</ETag>"
            f"<Size>{len(self.objects[k])}</Size></Contents>"
            for k in shown
        )
        more = f"<NextContinuationToken>{escape(shown[-1])}</NextContinuationToken>"
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{self.bucket}</Name><KeyCount>{len(shown)}</KeyCount>"
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
            f"{more if truncated else ''}{'<EncodingType>url</EncodingType>' if url else ''}"
            f"{contents}</ListBucketResult>"
        ).encode()


def _etag(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeS3

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _target(self) -> tuple[str, str, dict[str, str]]:
        path, _, raw_query = self.path.partition("?")
        bucket, _, key = urllib.parse.unquote(path.lstrip("/")).partition("/")
        return bucket, key, dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))

    def do_HEAD(self) -> None:
        self._object(head=True)

    def do_GET(self) -> None:
        bucket, key, query = self._target()
        if bucket != self.server.bucket:
            self._send(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        elif not key and query.get("list-type") == "2":
            self.server.list_requests += 1
            self._send(200, self.server.page(query), {"Content-Type": "application/xml"})
        else:
            self._object(head=False)

    def _object(self, *, head: bool) -> None:
        _, key, _ = self._target()
        data = self.server.objects.get(key)
        if data is None:
            self._send(404, b"" if head else b"<Error><Code>NoSuchKey</Code></Error>")
            return
        headers = {"ETag": f'"{_etag(data)}"'}
        ranged = self.headers.get("Range", "")
        if not ranged.startswith("bytes=") or head:
            self._send(200, data, headers, head=head)
            return
        first_text, _, last_text = ranged[len("bytes=") :].partition("-")
        first = int(first_text)
        if first >= len(data):
            self._send(416, b"<Error><Code>InvalidRange</Code></Error>", headers)
            return
        last = min(int(last_text), len(data) - 1) if last_text else len(data) - 1
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        self._send(206, data[first : last + 1], headers)

    def _send(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


@contextmanager
def fake_s3(bucket: str, objects: dict[str, bytes], *, overlap: bool = False) -> Iterator[FakeS3]:
    """A running `FakeS3`, shut down on leaving."""
    server = FakeS3(bucket, objects, overlap=overlap)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def fake_s3_config(server: FakeS3) -> tuple[ReaderConfig, Credentials]:
    """A reader's settings for `server`, in small parts with quick retries."""
    config = ReaderConfig(
        endpoint_url=server.url,
        region="us-east-1",
        part_size=64 * 2**10,
        max_attempts=2,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )
    return config, Credentials("fake", "fake-secret")

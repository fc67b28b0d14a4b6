"""Timeouts, retries, truncation and cancellation against a scripted fake S3 on 127.0.0.1.

The fake sits outside the code under test: a threaded HTTP/1.1 server whose behaviour is chosen
by the object key (hang before answering, stall mid-body, truncate, reset, 503 SlowDown N times).
"""

from __future__ import annotations

import collections
import http.server
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from native_loader import Credentials, ReaderConfig, S3Error, S3Reader

BODY = bytes(range(256)) * 40  # 10240 bytes
HOLD_MAX_S = 10.0  # a hanging handler gives up after this, whatever happens


class _FakeS3(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stop = threading.Event()
        self.hits: collections.Counter[str] = collections.Counter()
        self.requests: list[
            tuple[str, dict[str, str]]
        ] = []  # (path, lower-cased headers) in arrival order
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FakeS3

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _hold(self) -> None:
        self.server.stop.wait(HOLD_MAX_S)

    def do_GET(self) -> None:
        key = self.path.split("?")[0].split("/", 2)[-1]
        with self.server.lock:
            self.server.requests.append(
                (self.path, {k.lower(): v for k, v in self.headers.items()})
            )
            self.server.hits[key] += 1
            hit = self.server.hits[key]
        if "list-type=2" in self.path:
            self._stuck_listing()
            return
        if key == "hang":
            self._hold()
            self.close_connection = True
            return
        if key == "reset":
            self.close_connection = True
            return  # closes without a response
        if key.startswith("flaky-") and hit <= int(key.split("-")[1]):
            self._error(503, "SlowDown", "Please reduce your request rate.")
            return
        if key == "forbidden":
            self._error(403, "AccessDenied", "Access Denied")
            return
        if key == "server-error":
            self._error(500, "InternalError", "We encountered an internal error.")
            return
        first, last = 0, len(BODY) - 1
        header = self.headers.get("Range", "")
        if header.startswith("bytes="):
            a, _, b = header[6:].partition("-")
            first, last = int(a), min(int(b), len(BODY) - 1)
        chunk = BODY[first : last + 1]
        self.send_response(206 if header else 200)
        self.send_header("Content-Length", str(len(chunk)))
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(BODY)}")
        self.send_header("ETag", '"fake-etag"')
        self.end_headers()
        if key == "stall":
            self.wfile.write(chunk[:10])
            self.wfile.flush()
            self._hold()
            self.close_connection = True
            return
        if key == "truncate":
            self.wfile.write(chunk[: len(chunk) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(chunk)

    def _stuck_listing(self) -> None:
        """A listing page that is always truncated and always names the same next token."""
        body = (
            b"<?xml version='1.0' encoding='UTF-8'?><ListBucketResult><IsTruncated>true"
            b"</IsTruncated><NextContinuationToken>same</NextContinuationToken><Contents><Key>k"
            b"</Key><Size>1</Size><ETag>e</ETag></Contents></ListBucketResult>"
        )
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> None:
        body = (
            f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
            f"<Message>{message}</Message><RequestId>req-{code}</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def fake_s3() -> Iterator[_FakeS3]:
    server = _FakeS3()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=HOLD_MAX_S)


def _reader(fake: _FakeS3, **overrides: Any) -> S3Reader:
    settings: dict[str, Any] = {
        "endpoint_url": fake.url,
        "region": "us-east-1",
        "max_attempts": 3,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "part_size": 64 * 2**10,
        "max_inflight_bytes": 2**20,
    }
    settings.update(overrides)
    return S3Reader(ReaderConfig(**settings), credentials=Credentials("fake", "fake-secret"))


def test_plain_read(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3) as reader:
        assert bytes(reader.read("s3://bucket/ok")) == BODY


@pytest.mark.timing
def test_first_byte_timeout(fake_s3: _FakeS3) -> None:
    start = time.monotonic()
    with _reader(fake_s3, first_byte_timeout_s=0.3, max_attempts=2) as reader:
        with pytest.raises(TimeoutError, match="first_byte_timeout_s") as info:
            reader.read("s3://bucket/hang")
        assert reader.stats()["retries"] == 1
    assert time.monotonic() - start < 3.0
    assert fake_s3.hits["hang"] == 2
    assert type(pickle.loads(pickle.dumps(info.value))) is TimeoutError


@pytest.mark.timing
def test_stall_timeout(fake_s3: _FakeS3) -> None:
    start = time.monotonic()
    with (
        _reader(fake_s3, stall_timeout_s=0.3, max_attempts=2) as reader,
        pytest.raises(TimeoutError, match="stalled"),
    ):
        reader.read("s3://bucket/stall")
    assert time.monotonic() - start < 3.0


def test_truncated_body_is_retried_then_connection_error(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3) as reader:
        with pytest.raises(ConnectionError, match="after 3 attempts"):
            reader.read("s3://bucket/truncate")
        assert reader.stats()["retries"] == 2
    assert fake_s3.hits["truncate"] == 3


def test_reset_is_retried(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3) as reader, pytest.raises(ConnectionError):
        reader.read("s3://bucket/reset")
    assert fake_s3.hits["reset"] == 3


def test_slowdown_is_retried_until_success(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3, max_attempts=4) as reader:
        result = reader.read("s3://bucket/flaky-2")
        assert bytes(result) == BODY
        assert result.attempts == 3


def test_slowdown_is_not_counted_against_max_attempts(fake_s3: _FakeS3) -> None:
    # adaptive_rate=False: the retries are not paced
    # (tests/native/test_native_throttle.py covers that)
    with _reader(fake_s3, max_attempts=2, adaptive_rate=False) as reader:
        result = reader.read("s3://bucket/flaky-5")
        assert bytes(result) == BODY and result.attempts == 6
        assert reader.stats()["throttled"] == 5
    assert fake_s3.hits["flaky-5"] == 6


def test_slowdown_beyond_max_throttled_s(fake_s3: _FakeS3) -> None:
    with (
        _reader(fake_s3, max_attempts=2, max_throttled_s=0) as reader,
        pytest.raises(S3Error) as info,
    ):
        reader.read("s3://bucket/flaky-5")
    assert (info.value.code, info.value.status) == ("SlowDown", 503)
    assert info.value.request_id == "req-SlowDown"
    assert "max_throttled_s=0" in str(info.value)
    assert fake_s3.hits["flaky-5"] == 1


def test_5xx_is_retried_4xx_is_not(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3) as reader:
        with pytest.raises(S3Error, match="InternalError"):
            reader.read("s3://bucket/server-error")
        with pytest.raises(PermissionError, match="AccessDenied"):
            reader.read("s3://bucket/forbidden")
    assert fake_s3.hits["server-error"] == 3
    assert fake_s3.hits["forbidden"] == 1


@pytest.mark.timing
def test_close_interrupts_a_blocked_read(fake_s3: _FakeS3) -> None:
    reader = _reader(fake_s3)
    closer = threading.Timer(0.3, reader.close)
    start = time.monotonic()
    closer.start()
    try:
        with pytest.raises(ValueError, match="closed"):
            reader.read("s3://bucket/hang")
    finally:
        closer.cancel()
        closer.join()
    assert time.monotonic() - start < 2.0
    with pytest.raises(ValueError, match="closed"):
        reader.read("s3://bucket/ok")


@pytest.mark.timing
def test_leaving_read_many_cancels_inflight_requests(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3) as reader:
        stream = reader.read_many(["s3://bucket/ok"] + ["s3://bucket/hang"] * 4)
        assert bytes(next(stream)) == BODY
        time.sleep(0.1)
        assert reader.stats()["active_requests"] == 4
        start = time.monotonic()
        stream.close()  # type: ignore[attr-defined]
        while reader.stats()["active_requests"] and time.monotonic() - start < 2:
            time.sleep(0.01)
        stats = reader.stats()
        assert stats["active_requests"] == 0
        assert stats["open_tickets"] == 0
        assert time.monotonic() - start < 1.0


def test_signed_request_headers(fake_s3: _FakeS3) -> None:
    creds = Credentials("fake", "fake-secret", session_token="the-session-token")
    config = ReaderConfig(endpoint_url=fake_s3.url, region="eu-west-1")
    with S3Reader(config, credentials=creds) as reader:
        reader.read("s3://bucket/ok")
    path, headers = fake_s3.requests[-1]
    assert path == "/bucket/ok"
    assert headers["host"] == f"127.0.0.1:{fake_s3.server_address[1]}"
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=fake/")
    assert "/eu-west-1/s3/aws4_request" in headers["authorization"]
    assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert headers["x-amz-security-token"] == "the-session-token"
    assert headers["range"] == "bytes=0-8388607"


def test_unsigned_requests(fake_s3: _FakeS3) -> None:
    config = ReaderConfig(endpoint_url=fake_s3.url, unsigned=True)
    with S3Reader(config) as reader:
        assert bytes(reader.read("s3://bucket/ok")) == BODY
    _, headers = fake_s3.requests[-1]
    assert "authorization" not in headers
    assert "x-amz-date" not in headers


def test_virtual_hosted_addressing(fake_s3: _FakeS3) -> None:
    # curl resolves every *.localhost name to the loopback address.
    port = fake_s3.server_address[1]
    config = ReaderConfig(endpoint_url=f"http://localhost:{port}", addressing_style="virtual")
    with S3Reader(config, credentials=Credentials("fake", "fake-secret")) as reader:
        assert bytes(reader.read("s3://my-bucket/ok")) == BODY
        path, headers = fake_s3.requests[-1]
        assert (path, headers["host"]) == ("/ok", f"my-bucket.localhost:{port}")
        for bucket in ("dotted.bucket", "Upper_Case"):  # not a DNS label: path style
            reader.read(f"s3://{bucket}/ok")
            path, headers = fake_s3.requests[-1]
            assert (path, headers["host"]) == (f"/{bucket}/ok", f"localhost:{port}")


def test_listing_that_never_advances_is_an_error(fake_s3: _FakeS3) -> None:
    with _reader(fake_s3) as reader, pytest.raises(S3Error, match="did not advance"):
        list(reader.list("s3://bucket/"))


@pytest.fixture
def tls_fake_s3(tmp_path: Any) -> Iterator[tuple[_FakeS3, str]]:
    """The fake behind TLS with a self-signed certificate for 127.0.0.1 (made with openssl)."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
    command += " -addext subjectAltName=IP:127.0.0.1"
    args = [*command.split(), "-keyout", str(key), "-out", str(cert)]
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    server = _FakeS3()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server, str(cert)
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=HOLD_MAX_S)


def test_https_verifies_the_server_with_aws_ca_bundle(
    tls_fake_s3: tuple[_FakeS3, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, cert = tls_fake_s3
    url = f"https://127.0.0.1:{server.server_address[1]}"
    config = ReaderConfig(endpoint_url=url, max_attempts=2, backoff_base_s=0.01)
    with (
        S3Reader(config, credentials=Credentials("fake", "fake-secret")) as reader,
        pytest.raises(ConnectionError, match="certificate"),
    ):
        reader.read("s3://bucket/ok")  # self-signed: not trusted by the system store
    monkeypatch.setenv("AWS_CA_BUNDLE", cert)
    with S3Reader(config, credentials=Credentials("fake", "fake-secret")) as reader:
        assert bytes(reader.read("s3://bucket/ok")) == BODY
        assert bytes(reader.read_range("s3://bucket/ok", 100, 50)) == BODY[100:150]

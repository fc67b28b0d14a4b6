"""The emulating proxy (`advisor.demo.proxy`) and the tests' fault-injecting one built on it
(`testing.FaultProxy`): bytes pass intact, latency and bandwidth are as configured, and every
fault kind has exactly its documented client-visible effect.

Most tests put the proxy in front of a tiny threaded HTTP/1.1 server started here (fast and
deterministic); two go through the real SeaweedFS endpoint to show that SigV4 passes through.
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import random
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import botocore.config
import botocore.exceptions
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.demo.proxy import NetworkProfile, Proxy, ProxyError
from advisor.demo.server import S3Endpoint
from testing import FaultProxy, Faults, When

# every test here times a delay, a rate or a stall: `make test` runs them alone
pytestmark = pytest.mark.timing


@functools.lru_cache(maxsize=8)
def payload(size: int) -> bytes:
    """Deterministic, non-repeating bytes, so that a shifted or dropped block changes the hash."""
    return random.Random(size).randbytes(size)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    """GET|HEAD /bytes/N (Content-Length), /chunked/N, /close/N (body until close), /empty (204),
    /drop/N (Content-Length, then the server closes the connection anyway);
    PUT|POST answer the sha256 of the body they read (Content-Length or chunked)."""

    protocol_version = "HTTP/1.1"
    server: _Upstream

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(with_body=False)

    def do_GET(self) -> None:
        self._serve(with_body=True)

    def _serve(self, with_body: bool) -> None:
        self.server.seen.append((self.command, self.path))
        kind, _, size = self.path.split("?")[0].strip("/").partition("/")
        data = payload(int(size or 0))
        if kind == "empty":
            self.send_response(204)
            self.end_headers()
        elif kind == "chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if with_body:
                sizes = random.Random(len(data)).choices([1, 7, 100, 4096, 300_000], k=4096)
                pos = 0
                for n in sizes:
                    if pos >= len(data):
                        break
                    piece = data[pos : pos + n]
                    pos += len(piece)
                    self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif kind == "drop":  # keep-alive as far as the headers say, then close anyway
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.close_connection = True
            if with_body:
                self.wfile.write(data)
        elif kind == "close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            if with_body:
                self.wfile.write(data)
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if with_body:
                self.wfile.write(data)

    def do_PUT(self) -> None:
        self.server.seen.append((self.command, self.path))
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            for _ in range(100_000):
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.read(2)
            body = b"".join(parts)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        answer = sha(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_POST = do_PUT


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # the fault tests reset connections on purpose: not worth a traceback in the test log
        if not isinstance(sys.exc_info()[1], ConnectionResetError):
            super().handle_error(request, client_address)


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def connect(proxy: Proxy, timeout: float = 5.0) -> http.client.HTTPConnection:
    port = int(proxy.url.rsplit(":", 1)[1])
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def get(conn: http.client.HTTPConnection, path: str, method: str = "GET") -> tuple[int, bytes]:
    conn.request(method, path)
    response = conn.getresponse()
    return response.status, response.read()


def raw_exchange(
    proxy: Proxy, request: bytes, timeout: float = 5.0
) -> tuple[bytes, Exception | None]:
    """Send raw bytes, read until EOF or an error; what arrived and the error, if any."""
    port = int(proxy.url.rsplit(":", 1)[1])
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        try:
            for _ in range(100_000):
                data = sock.recv(1 << 20)
                if not data:
                    return bytes(received), None
                received += data
        except OSError as e:
            return bytes(received), e
    raise AssertionError("response never ended")


def split_response(raw: bytes) -> tuple[bytes, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return head, body


# --- pass-through -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 1_048_583])
def test_get_passes_bytes_through_intact(upstream: _Upstream, size: int) -> None:
    with Proxy(upstream.url) as proxy:
        conn = connect(proxy)
        status, body = get(conn, f"/bytes/{size}")
        conn.close()
        assert status == 200 and sha(body) == sha(payload(size))
        stats = proxy.stats()
    assert (stats.connections, stats.requests, stats.forwarded) == (1, 1, 1)
    assert stats.bytes_from_upstream - stats.bytes_to_client == 0
    assert stats.bytes_to_client > size


def test_chunked_response_is_relayed_with_its_framing(upstream: _Upstream) -> None:
    size = 2_000_003
    with Proxy(upstream.url) as proxy:
        conn = connect(proxy)
        status, body = get(conn, f"/chunked/{size}")
        assert status == 200 and sha(body) == sha(payload(size))
        status, body = get(conn, "/bytes/10")  # the connection is still in step
        assert status == 200 and body == payload(10)
        conn.close()
        raw, error = raw_exchange(
            proxy, b"GET /chunked/50 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
    assert error is None
    head, framed = split_response(raw)
    assert b"transfer-encoding: chunked" in head.lower()
    assert framed.endswith(b"0\r\nX-Trailer: yes\r\n\r\n") and b";ext=1\r\n" in framed


@pytest.mark.parametrize("chunked", [False, True])
def test_request_bodies_reach_upstream_intact(upstream: _Upstream, chunked: bool) -> None:
    data = payload(3_000_001)
    with Proxy(upstream.url) as proxy:
        conn = connect(proxy)
        if chunked:
            pieces = iter([data[:1], data[1:100_000], data[100_000:]])
            conn.request("PUT", "/upload", body=pieces, encode_chunked=True)
        else:
            conn.request("PUT", "/upload", body=data)
        response = conn.getresponse()
        assert response.read().decode() == sha(data)
        conn.request("POST", "/upload", body=b"abc", headers={"Expect": "100-continue"})
        response = conn.getresponse()
        assert response.status == 200 and response.read().decode() == sha(b"abc")
        conn.close()


def test_head_204_and_until_close_bodies(upstream: _Upstream) -> None:
    with Proxy(upstream.url) as proxy:
        conn = connect(proxy)
        conn.request("HEAD", "/bytes/1000")
        response = conn.getresponse()
        assert response.headers["Content-Length"] == "1000" and response.read() == b""
        assert get(conn, "/empty") == (204, b"")
        assert get(conn, "/bytes/5") == (200, payload(5))  # same connection, still in step
        assert get(conn, "/close/70000") == (200, payload(70_000))
        conn.close()
        assert proxy.stats().connections == 1


def test_pipelined_requests_are_answered_in_order(upstream: _Upstream) -> None:
    requests = (
        b"GET /bytes/3 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"HEAD /bytes/4 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /bytes/5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    with Proxy(upstream.url) as proxy:
        raw, error = raw_exchange(proxy, requests)
        assert proxy.stats().bytes_to_client == len(raw)
    assert error is None and raw.count(b"HTTP/1.1 200 ") == 3
    assert raw.endswith(b"\r\n\r\n" + payload(5))
    assert [path for _, path in upstream.seen] == ["/bytes/3", "/bytes/4", "/bytes/5"]


def test_upstream_closing_an_idle_connection_is_reopened(upstream: _Upstream) -> None:
    with Proxy(upstream.url) as proxy:
        conn = connect(proxy)
        assert get(conn, "/drop/10") == (200, payload(10))
        time.sleep(0.1)  # the upstream's close reaches the proxy
        assert get(conn, "/bytes/7") == (200, payload(7))
        conn.close()
        assert proxy.stats().connections == 1


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(0, 300_000), min_size=1, max_size=4),
    chunked=st.booleans(),
    bandwidth=st.sampled_from([0.0, 500.0]),
)
def test_any_sequence_of_bodies_passes_intact(
    upstream: _Upstream, sizes: list[int], chunked: bool, bandwidth: float
) -> None:
    kind = "chunked" if chunked else "bytes"
    with Proxy(upstream.url, network=NetworkProfile(bandwidth_mbps=bandwidth)) as proxy:
        conn = connect(proxy)
        for size in sizes:
            assert get(conn, f"/{kind}/{size}") == (200, payload(size))
        conn.close()


def test_many_concurrent_connections(upstream: _Upstream) -> None:
    def client(i: int) -> list[str]:
        conn = connect(proxy)
        digests = [sha(get(conn, f"/bytes/{100_000 + i * 10 + j}")[1]) for j in range(4)]
        conn.close()
        return digests

    with Proxy(upstream.url) as proxy, ThreadPoolExecutor(16) as pool:
        results = list(pool.map(client, range(16)))
        stats = proxy.stats()
    assert results == [[sha(payload(100_000 + i * 10 + j)) for j in range(4)] for i in range(16)]
    assert (stats.connections, stats.requests) == (16, 64)


def test_throughput_is_not_a_bottleneck(upstream: _Upstream) -> None:
    size = 64_000_000
    payload(size)
    with Proxy(upstream.url) as proxy:
        conn = connect(proxy)
        get(conn, "/bytes/1")
        start = time.monotonic()
        status, body = get(conn, f"/bytes/{size}")
        elapsed = time.monotonic() - start
        conn.close()
    assert status == 200 and len(body) == size
    # Aim > 300 MB/s; the bound is loose because client, server and proxy share two busy cores.
    assert size / elapsed / 1e6 > 100, f"{size / elapsed / 1e6:.0f} MB/s"


# --- network emulation --------------------------------------------------------------------------


def test_latency_is_added_to_every_request_on_a_keep_alive_connection(upstream: _Upstream) -> None:
    with Proxy(upstream.url, network=NetworkProfile(latency_ms=100)) as proxy:
        conn = connect(proxy)
        elapsed = []
        for path in ["/bytes/10", "/bytes/10", "/empty", "/bytes/1000"]:
            start = time.monotonic()
            get(conn, path)
            elapsed.append(time.monotonic() - start)
        conn.close()
        assert proxy.stats().connections == 1
    assert all(0.1 <= t < 0.1 + 0.15 for t in elapsed), elapsed


def test_bandwidth_caps_each_connection(upstream: _Upstream) -> None:
    size = 5_000_000
    with Proxy(upstream.url, network=NetworkProfile(bandwidth_mbps=20)) as proxy:
        conn = connect(proxy)
        start = time.monotonic()
        status, body = get(conn, f"/bytes/{size}")
        elapsed = time.monotonic() - start
        conn.close()
    assert status == 200 and sha(body) == sha(payload(size))
    # 5 MB at 20 MB/s = 0.25 s, minus the bucket's burst of 10 ms worth (0.2 MB).
    assert 0.235 <= elapsed < 0.25 + 0.5, elapsed


# --- faults -------------------------------------------------------------------------------------


def test_slow_down_for_the_third_and_fourth_get(upstream: _Upstream) -> None:
    with FaultProxy(upstream.url, faults=Faults(slow_down=When(requests=(3, 4)))) as proxy:
        conn = connect(proxy)
        results = []
        for i in range(6):
            conn.request("HEAD", "/bytes/1")  # not a GET: neither numbered nor hit
            conn.getresponse().read()
            conn.request("GET", f"/bytes/{i}?x=1")
            response = conn.getresponse()
            results.append((response.status, response.read()))
        conn.close()
        stats = proxy.stats()
    assert [status for status, _ in results] == [200, 200, 503, 503, 200, 200]
    assert b"<Code>SlowDown</Code>" in results[2][1]
    assert b"<Resource>/bytes/2</Resource>" in results[2][1]
    assert results[4][1] == payload(4)
    gets = [path for method, path in upstream.seen if method == "GET"]
    assert gets == ["/bytes/0?x=1", "/bytes/1?x=1", "/bytes/4?x=1", "/bytes/5?x=1"]
    assert stats.faults_injected == {"slow_down": 2}
    assert (stats.connections, stats.requests, stats.forwarded) == (1, 12, 10)


def test_slow_down_answers_expect_continue_at_once_and_closes(upstream: _Upstream) -> None:
    faults = Faults(slow_down=When(first_n=1, methods=["PUT"]))
    with FaultProxy(upstream.url, network=NetworkProfile(latency_ms=50), faults=faults) as proxy:
        start = time.monotonic()
        raw, error = raw_exchange(
            proxy,
            b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        )
        assert time.monotonic() - start >= 0.05  # the latency applies to canned answers too
    head, body = split_response(raw)
    assert head.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in head
    assert b"<Code>SlowDown</Code>" in body and error is None
    assert upstream.seen == []


def test_every_fifth_get_is_truncated_at_half(upstream: _Upstream) -> None:
    with FaultProxy(
        upstream.url, faults=Faults(truncate=When(every_n=5), truncate_at=0.5)
    ) as proxy:
        outcomes = []
        conn = connect(proxy)
        for _ in range(10):
            try:
                status, body = get(conn, "/bytes/1001")
                assert status == 200 and body == payload(1001)
                outcomes.append("ok")
            except http.client.IncompleteRead as e:
                assert e.partial == payload(1001)[:500] and e.expected == 501
                outcomes.append("cut")
                conn.close()
                conn = connect(proxy)
        conn.close()
        assert proxy.stats().faults_injected == {"truncate": 2}
    assert outcomes == ["ok"] * 4 + ["cut"] + ["ok"] * 4 + ["cut"]


def test_reset_instead_of_a_response(upstream: _Upstream) -> None:
    with FaultProxy(upstream.url, faults=Faults(reset=When(after_n=1))) as proxy:
        conn = connect(proxy)
        assert get(conn, "/bytes/3") == (200, payload(3))
        with pytest.raises(ConnectionResetError):
            get(conn, "/bytes/3")
        conn.close()
        raw, error = raw_exchange(proxy, b"GET /bytes/3 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert raw == b"" and isinstance(error, ConnectionResetError)
        assert proxy.stats().faults_injected == {"reset": 2}
    assert upstream.seen == [("GET", "/bytes/3")]


def test_reset_mid_body_delivers_the_prefix_then_resets(upstream: _Upstream) -> None:
    faults = Faults(reset_mid_body=When(first_n=1), reset_at=0.25)
    with FaultProxy(upstream.url, faults=faults) as proxy:
        raw, error = raw_exchange(proxy, b"GET /bytes/400000 HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body = split_response(raw)
        assert b"Content-Length: 400000" in head
        assert body == payload(400_000)[:100_000] and isinstance(error, ConnectionResetError)
        conn = connect(proxy)
        assert get(conn, "/bytes/400000") == (200, payload(400_000))  # only the first is hit
        conn.close()
        assert proxy.stats().faults_injected == {"reset_mid_body": 1}


def test_stall_pauses_the_body_then_finishes(upstream: _Upstream) -> None:
    faults = Faults(stall=When(requests=(1, 2)), stall_s=0.6, stall_at=0.5)
    with FaultProxy(upstream.url, faults=faults) as proxy:
        conn = connect(proxy, timeout=0.3)  # a reader with a short timeout gives up
        conn.request("GET", "/bytes/1000")
        response = conn.getresponse()
        assert response.status == 200
        with pytest.raises(TimeoutError):
            response.read()
        conn.close()
        conn = connect(proxy)  # a patient one gets the whole body, late
        start = time.monotonic()
        assert get(conn, "/bytes/1000") == (200, payload(1000))
        assert 0.6 <= time.monotonic() - start < 0.6 + 0.3
        start = time.monotonic()
        assert get(conn, "/bytes/1000") == (200, payload(1000))  # the third is not stalled
        assert time.monotonic() - start < 0.3
        conn.close()
        assert proxy.stats().faults_injected == {"stall": 2}


def test_stall_head_delays_the_first_byte(upstream: _Upstream) -> None:
    faults = Faults(stall_head=When(first_n=2, methods=None), stall_s=0.5)
    with FaultProxy(upstream.url, faults=faults) as proxy:
        conn = connect(proxy, timeout=0.2)
        conn.request("HEAD", "/bytes/10")
        with pytest.raises(TimeoutError):
            conn.getresponse()
        conn.close()
        conn = connect(proxy)
        start = time.monotonic()
        assert get(conn, "/bytes/10") == (200, payload(10))
        assert 0.5 <= time.monotonic() - start < 0.5 + 0.3
        conn.close()
        assert proxy.stats().faults_injected == {"stall_head": 2}
    assert upstream.seen == [("HEAD", "/bytes/10"), ("GET", "/bytes/10")]


def test_body_faults_skip_empty_bodies_and_apply_to_chunked_after_the_head(
    upstream: _Upstream,
) -> None:
    faults = Faults(truncate=When(after_n=0, methods=None))
    with FaultProxy(upstream.url, faults=faults) as proxy:
        conn = connect(proxy)
        assert get(conn, "/empty") == (204, b"")
        conn.request("HEAD", "/bytes/10")
        assert conn.getresponse().read() == b""
        conn.close()
        assert proxy.stats().faults_injected == {}
        raw, error = raw_exchange(proxy, b"GET /chunked/1000 HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body = split_response(raw)
        assert head.startswith(b"HTTP/1.1 200") and body == b"" and error is None
        assert proxy.stats().faults_injected == {"truncate": 1}


def test_stop_is_prompt_with_open_connections(upstream: _Upstream) -> None:
    proxy = FaultProxy(upstream.url, faults=Faults(stall=When(first_n=1), stall_s=60)).start()
    port = int(proxy.url.rsplit(":", 1)[1])
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    stalled = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        stalled.sendall(b"GET /bytes/100000 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert stalled.recv(1 << 20).startswith(b"HTTP/1.1 200")
        for _ in range(100):
            if proxy.stats().active_connections == 2:
                break
            time.sleep(0.01)
        start = time.monotonic()
        proxy.stop()
        assert time.monotonic() - start < 1.0
        for sock in (idle, stalled):
            try:
                rest = b"".join(iter(lambda s=sock: s.recv(1 << 20), b""))  # type: ignore[misc]
            except ConnectionResetError:
                rest = b""
            assert len(rest) < 100_000
    finally:
        idle.close()
        stalled.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# --- refusals -----------------------------------------------------------------------------------


def test_oversized_head_gets_431(upstream: _Upstream) -> None:
    with Proxy(upstream.url) as proxy:
        huge = b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
        raw, _ = raw_exchange(proxy, huge)
    assert raw.startswith(b"HTTP/1.1 431 ")
    assert upstream.seen == []


def test_unreachable_upstream_gets_502() -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{placeholder.getsockname()[1]}"
        with Proxy(dead) as proxy:
            raw, _ = raw_exchange(proxy, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 502 ")


def test_idle_client_connections_are_closed(upstream: _Upstream) -> None:
    with Proxy(upstream.url, idle_timeout_s=0.2) as proxy:
        port = int(proxy.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            start = time.monotonic()
            assert sock.recv(100) == b""
            assert 0.2 <= time.monotonic() - start < 1.0
        for _ in range(100):
            if proxy.stats().active_connections == 0:
                break
            time.sleep(0.01)
        assert proxy.stats().active_connections == 0


def test_url_only_while_running_and_a_busy_port_is_refused(upstream: _Upstream) -> None:
    proxy = Proxy(upstream.url)
    with pytest.raises(ProxyError, match="not running"):
        _ = proxy.url
    with proxy:
        port = int(proxy.url.rsplit(":", 1)[1])
        with pytest.raises(OSError), Proxy(upstream.url, port=port):
            pass
    with pytest.raises(ProxyError):
        _ = proxy.url
    with Proxy(upstream.url, port=port) as again:  # the port is free again after stop()
        assert again.url == f"http://127.0.0.1:{port}"


# --- configuration ------------------------------------------------------------------------------

SELECTION_CASES = [
    (When(requests=(3, 4)), [3, 4]),
    (When(requests=range(2, 4), first_n=1), [1, 2, 3]),
    (When(first_n=2), [1, 2]),
    (When(every_n=5), [5, 10]),
    (When(after_n=9), [10, 11, 12]),
    (When(after_n=0), list(range(1, 13))),
]


@pytest.mark.parametrize(("when", "hit"), SELECTION_CASES)
def test_when_selects_request_numbers(when: When, hit: list[int]) -> None:
    assert [n for n in range(1, 13) if when.matches(n)] == hit


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: When(), "selects no request"),
        (lambda: When(requests=(0,)), "start at 1"),
        (lambda: When(every_n=-1), "must be >= 0"),
        (lambda: Faults(truncate_at=1.5), "truncate_at=1.5"),
        (lambda: Faults(stall_s=-1), "stall_s"),
        (lambda: NetworkProfile(bandwidth_mbps=-1), "bandwidth_mbps"),
        (lambda: NetworkProfile(latency_ms=float("nan")), "latency_ms"),
        (lambda: Proxy("https://example.com"), "http://host:port"),
    ],
)
def test_nonsense_configuration_is_refused(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_when_counts_only_its_methods() -> None:
    assert When(first_n=1).counts("GET") and not When(first_n=1).counts("PUT")
    assert When(first_n=1, methods=None).counts("PUT")
    assert When(first_n=1, methods=["put"]).counts("PUT")


# --- through the real S3 server -----------------------------------------------------------------


def test_signed_requests_pass_through_to_seaweedfs(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    data = payload(1_500_000)
    with Proxy(s3_endpoint.url, network=NetworkProfile(latency_ms=5)) as proxy:
        client = proxy.proxied(s3_endpoint).boto3_client()
        client.put_object(Bucket=s3_bucket, Key="a/b.bin", Body=data)
        assert client.get_object(Bucket=s3_bucket, Key="a/b.bin")["Body"].read() == data
        ranged = client.get_object(Bucket=s3_bucket, Key="a/b.bin", Range="bytes=10-19")
        assert ranged["Body"].read() == data[10:20]
        assert client.head_object(Bucket=s3_bucket, Key="a/b.bin")["ContentLength"] == len(data)
        listed = client.list_objects_v2(Bucket=s3_bucket)["Contents"]
        assert [o["Key"] for o in listed] == ["a/b.bin"]
        stats = proxy.stats()
    assert stats.forwarded == stats.requests >= 5


def test_boto3_reads_the_canned_slow_down_as_an_s3_error(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    s3_endpoint.boto3_client().put_object(Bucket=s3_bucket, Key="k", Body=b"value")
    with FaultProxy(s3_endpoint.url, faults=Faults(slow_down=When(requests=(1, 2)))) as proxy:
        endpoint = proxy.proxied(s3_endpoint)
        no_retry = endpoint.boto3_client(attempts=1)
        with pytest.raises(botocore.exceptions.ClientError) as info:
            no_retry.get_object(Bucket=s3_bucket, Key="k")
        assert info.value.response["Error"]["Code"] == "SlowDown"
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        # The standard retry mode gets through once request 2 has been refused.
        retrying = endpoint.boto3_client()
        assert retrying.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"value"
        assert proxy.stats().faults_injected == {"slow_down": 2}

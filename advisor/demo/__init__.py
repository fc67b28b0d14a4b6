"""The local demo: a real S3 endpoint on 127.0.0.1 with generated datasets.

`ensure_demo()` gives the notebook and the CLI a running endpoint with the demo data: the one
`make lab` started (found through LOADER_ADVISOR_DEMO_* variables) or one started on demand in
this process, from whichever thread asks; it lives until `stop_demo()` or until this process
exits or is killed (see `advisor.demo.server._Spawner`).

Only the layouts asked for are put in. Generated data is kept across kernels in a versioned cache
folder (`advisor.demo.datasets.DemoCache`), and beside it the server's store as it stood after
the upload (`advisor.demo.store`): a second kernel starts its server on a copy of that store,
neither generating nor uploading.
The server's data folder is removed when this process ends, however it ends: a small janitor
process outlives it, waits for it and the server to be gone, then deletes the folder (a kernel
shut down by Jupyter may be killed before its own exit handlers run).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from advisor.demo.datasets import (
    COMPLETE,
    DEMO_BUCKET,
    LAYOUTS,
    DemoCache,
    DemoSpec,
    Progress,
    default_cache_root,
    upload,
)
from advisor.demo.server import S3Credentials, S3Endpoint, S3Server, answers
from advisor.demo.store import StoreSnapshot, Summary, bucket_summary

ENV_URL = "LOADER_ADVISOR_DEMO_ENDPOINT"
ENV_ACCESS_KEY = "LOADER_ADVISOR_DEMO_ACCESS_KEY"
ENV_SECRET_KEY = "LOADER_ADVISOR_DEMO_SECRET_KEY"

__all__ = ["DEMO_BUCKET", "LAYOUTS", "Demo", "DemoSpec", "S3Endpoint", "S3Server", "ensure_demo"]


@dataclass(frozen=True)
class Demo:
    """A running demo endpoint and the URIs of its datasets (layout -> s3:// URI)."""

    endpoint: S3Endpoint
    uris: dict[str, str]
    # layouts put in by this process (None: a demo found through the environment holds them all)
    uploaded: set[str] | None = field(default=None, compare=False)

    def env(self) -> dict[str, str]:
        """Variables that let a child process (the Jupyter kernel) find this demo."""
        return {
            ENV_URL: self.endpoint.url,
            ENV_ACCESS_KEY: self.endpoint.credentials.access_key,
            ENV_SECRET_KEY: self.endpoint.credentials.secret_key,
        }


@dataclass(frozen=True)
class _Running:
    server: S3Server
    data_dir: Path  # the server's data folder, made here and handed to it
    janitor: subprocess.Popen[bytes]  # deletes that folder if this process is killed


_lock = threading.Lock()
_demo: Demo | None = None
_running: _Running | None = None
# The running server and its data folder (for tests and `bench`): `_running`'s, or None.
_server: S3Server | None = None
_data_dir: Path | None = None


def _from_env() -> Demo | None:
    url, key, secret = (os.environ.get(n) for n in (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY))
    if not (url and key and secret) or not answers(url):
        return None
    endpoint = S3Endpoint(url=url, credentials=S3Credentials(key, secret))
    return Demo(endpoint, _uris(LAYOUTS))


def ensure_demo(
    spec: DemoSpec | None = None,
    progress: Progress | None = None,
    layouts: Sequence[str] = LAYOUTS,
    cache: Path | None = None,
) -> Demo:
    """The demo endpoint with the datasets of `layouts`, started on first use in this process;
    a layout asked for later is put in then. `cache`: where generated data is kept across
    processes (default: `default_cache_root()`)."""
    global _demo
    spec, cache = spec or DemoSpec(), cache or default_cache_root()
    with _lock:
        if _demo is None:
            _demo = _from_env()
        if _demo is None:
            _demo = _start(spec, progress, layouts, cache)
        missing = [x for x in layouts if _demo.uploaded is not None and x not in _demo.uploaded]
        if missing:
            uris = upload(_demo.endpoint, spec=spec, progress=progress, layouts=missing,
                          cache=cache)  # fmt: skip
            _demo.uris.update(uris)
            assert _demo.uploaded is not None
            _demo.uploaded.update(missing)
        return _demo


def start_words(layout: str, cache: Path | None = None) -> str:
    """What starting the demo for `layout` is about to do, for a status line: find the running
    one, start on the store or the data an earlier start kept, or generate the data."""
    if _demo is not None or os.environ.get(ENV_URL):
        return "finding the demo endpoint ..."
    kept = DemoCache(cache or default_cache_root(), DemoSpec())
    try:
        stored = StoreSnapshot(kept, (layout,)).stamp() is not None
    except Exception:  # no `weed` binary: the start says so itself
        stored = False
    if stored or (kept.folder / layout / COMPLETE).is_file():
        return "starting the demo endpoint on the data an earlier start kept ..."
    return "starting the demo endpoint (first time: generating data) ..."


def _start(spec: DemoSpec, progress: Progress | None, layouts: Sequence[str], cache: Path) -> Demo:
    """A new endpoint holding `layouts`: on a copy of the store a kernel kept before, else
    filled by an upload and then kept for the next kernel (see `advisor.demo.store`)."""
    store = StoreSnapshot(DemoCache(cache, spec), layouts)
    data_dir = Path(tempfile.mkdtemp(prefix="loader-advisor-s3-"))
    try:
        kept = store.restore_into(data_dir)
        endpoint = _launch(data_dir)
        if kept is not None and _holds(endpoint, kept):
            if progress:
                for layout in layouts:
                    objects = kept.get(layout, [0, 0])[0]
                    progress(layout, objects, objects)
            return Demo(endpoint, _uris(layouts), set(layouts))
        if kept is not None:  # a kept store that does not list back what it should: start over
            _stop_locked()
            store.discard()
            data_dir = Path(tempfile.mkdtemp(prefix="loader-advisor-s3-"))
            endpoint = _launch(data_dir)
        upload(endpoint, spec=spec, progress=progress, layouts=layouts, cache=cache)
        endpoint = _keep(store, endpoint)
    except BaseException:
        _stop_locked()
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    return Demo(endpoint, _uris(layouts), set(layouts))


def _uris(layouts: Sequence[str]) -> dict[str, str]:
    return {layout: f"s3://{DEMO_BUCKET}/{layout}/" for layout in layouts}


def _holds(endpoint: S3Endpoint, kept: Summary) -> bool:
    """True when `endpoint` lists exactly the objects and bytes the kept store's stamp names."""
    try:
        return bucket_summary(endpoint) == kept
    except Exception:  # any answer but the listing means the store is not usable
        return False


def _keep(store: StoreSnapshot, endpoint: S3Endpoint) -> S3Endpoint:
    """Stop the server, keep a copy of its data folder for the next kernel, start it again on
    the same folder: the endpoint to use from now on. Keeping is best effort: on failure the
    next kernel uploads again."""
    assert _running is not None
    try:
        summary = bucket_summary(endpoint)
    except Exception:  # a listing that fails now would fail the next kernel's check too
        return endpoint
    data_dir = _running.data_dir
    _running.server.stop(flush=True)  # a whole folder: nothing is written while it is copied
    with contextlib.suppress(OSError):
        store.save_from(data_dir, summary)
    return _launch(data_dir)


def _launch(data_dir: Path) -> S3Endpoint:
    """Start a server on `data_dir` and the janitor that removes the folder after this
    process; they replace (and the new janitor is up before it ends) any server before."""
    global _running, _server, _data_dir
    server = S3Server(credentials=S3Credentials.from_env_or_dummy(), data_dir=data_dir)
    endpoint = server.start()
    running = _Running(server, data_dir, _watch_data_dir(server, data_dir))
    previous, _running = _running, running
    _server, _data_dir = server, data_dir
    if previous is not None:
        # its folder is deleted next, or was already flushed by `_keep` (no process left)
        previous.server.stop(flush=False)
        if previous.data_dir != data_dir:
            shutil.rmtree(previous.data_dir, ignore_errors=True)
        _end(previous.janitor)
    return endpoint


# Run as a separate process (its own session, so a kill of the kernel's process group spares
# it): wait until the process that started the demo and then the server are gone, then delete
# the server's data folder. Neither process is its child, so it waits on pidfds, not waitpid.
_JANITOR = """
import os, select, shutil, sys, time
owner, server, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def exited(pid, wait_s):
    # A pidfd turns readable when the process exits, a zombie not yet reaped included.
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:  # no pidfd here: signal 0 (a zombie then counts until it is reaped)
        time.sleep(wait_s)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False
    try:
        return bool(select.select([fd], [], [], wait_s)[0])
    finally:
        os.close(fd)
while os.path.isdir(folder) and not exited(owner, 0.5):
    pass
deadline = time.monotonic() + 30
while time.monotonic() < deadline and not exited(server, 0.2):
    pass
shutil.rmtree(folder, ignore_errors=True)
"""


def _watch_data_dir(server: S3Server, data_dir: Path) -> subprocess.Popen[bytes]:
    """Start the janitor that deletes `data_dir` once this process and `server` are gone."""
    return subprocess.Popen(
        [sys.executable, "-c", _JANITOR, str(os.getpid()), str(server.pid), str(data_dir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )  # fmt: skip


def _end(janitor: subprocess.Popen[bytes]) -> None:
    """End a janitor started here whose folder is gone or in the care of another one."""
    janitor.kill()
    janitor.wait(timeout=5)


def _stop_locked() -> None:
    global _demo, _running, _server, _data_dir
    running, _running = _running, None
    if running is not None:
        running.server.stop(flush=False)  # its folder is deleted next
        shutil.rmtree(running.data_dir, ignore_errors=True)
        _end(running.janitor)
    _server, _demo, _data_dir = None, None, None


def stop_demo() -> None:
    """Stop the demo endpoint this process started (no-op for one found through the env), and
    put back the AWS variables a session pointed at it (`advisor.demo.kernel_env`)."""
    from advisor.demo import kernel_env

    with _lock:
        _stop_locked()
    kernel_env.restore()


atexit.register(_stop_locked)  # a clean exit stops the server and deletes its folder at once

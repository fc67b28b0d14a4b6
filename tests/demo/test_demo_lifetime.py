"""The demo endpoint lives as long as the process that asked for it, whichever thread asked.

The user's paths take nothing prepared: no LOADER_ADVISOR_DEMO_* variables, no endpoint started
by a fixture. Each runs in a fresh interpreter, as a notebook kernel or a script would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from advisor.demo import ENV_ACCESS_KEY, ENV_SECRET_KEY, ENV_URL
from advisor.demo.datasets import DemoSpec
from advisor.demo.server import S3Endpoint, S3Server, answers

pytestmark = pytest.mark.s3


def _gone(pid: int) -> bool:
    """True once `pid` no longer runs (exited, or a zombie its new parent has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return False


def _stays_up(url: str, seconds: float = 8.0) -> bool:
    """True when `url` keeps answering for `seconds`: SeaweedFS takes a few seconds to shut down
    on SIGTERM, so a server that PR_SET_PDEATHSIG is killing still answers for a moment."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not answers(url):
            return False
        time.sleep(0.5)
    return True


def _user_env() -> dict[str, str]:
    """This environment without any demo variables: the kernel of a JupyterLab started by hand."""
    demo_names = (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY)
    return {k: v for k, v in os.environ.items() if k not in demo_names}


@pytest.mark.timeout(60)
def test_server_started_from_a_thread_outlives_that_thread() -> None:
    started: list[S3Endpoint] = []
    server = S3Server()
    thread = threading.Thread(target=lambda: started.append(server.start()))
    thread.start()
    thread.join(timeout=40)
    try:
        assert started, "the server did not start"
        assert _stays_up(started[0].url), "the server died with the thread that started it"
        assert server.pid is not None and not _gone(server.pid)
    finally:
        server.stop()


@pytest.mark.timeout(90)
def test_ensure_demo_from_a_thread_lives_until_stop_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python API from a short-lived thread: the endpoint outlives the thread, and
    `stop_demo()` ends it."""
    import advisor.demo

    for name in (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY):
        monkeypatch.delenv(name, raising=False)
    advisor.demo.stop_demo()  # forget a demo an earlier test may have found or started
    started: list[advisor.demo.Demo] = []
    small = DemoSpec(images=4, shard_mb=0.1, large_files=1, large_mb=0.1)
    thread = threading.Thread(target=lambda: started.append(advisor.demo.ensure_demo(small)))
    thread.start()
    thread.join(timeout=60)
    try:
        assert started, "ensure_demo did not finish"
        url = started[0].endpoint.url
        assert _stays_up(url), "the demo died with the thread that started it"
        assert advisor.demo._server is not None and advisor.demo._server.pid is not None
        pid = advisor.demo._server.pid
    finally:
        advisor.demo.stop_demo()
    assert _wait_gone(pid) and not answers(url)


_STARTS_IN_A_THREAD_THEN_WAITS = """
import sys, threading, time
from advisor.demo.server import S3Server
server = S3Server()
thread = threading.Thread(target=server.start)
thread.start()
thread.join()
print(server.pid, server.endpoint.url, flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(90)
def test_server_dies_with_its_process_even_on_sigkill(tmp_path: Path) -> None:
    """Started from a thread that has ended, the server still dies when its process is killed
    with SIGKILL (no atexit, no finally): the kernel sends it SIGTERM. (A bare `S3Server` has
    no janitor: its data folder goes in this test's temp folder, not the machine's.)"""
    child = subprocess.Popen(
        [sys.executable, "-c", _STARTS_IN_A_THREAD_THEN_WAITS],
        stdout=subprocess.PIPE,
        text=True,
        env={**_user_env(), "TMPDIR": str(tmp_path)},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        assert len(line) == 2, f"no server started (child exit {child.poll()})"
        pid, url = int(line[0]), line[1]
        assert _stays_up(url), "the server died with the thread that started it"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert _wait_gone(pid), f"the server (pid {pid}) outlived its SIGKILLed process"
        assert not answers(url)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        assert child.stdout is not None
        child.stdout.close()


_WIZARD_DEMO_THEN_TRIAL = """
import sys
from advisor.wizard.controller import WizardController
wizard = WizardController()
context, uploads = wizard.dataset_step.context, []
redraw = context.report
def report(message, progress=None):  # what the wizard's status is redrawn with
    if message.startswith("preparing the demo data"):
        uploads.append(progress)
    redraw(message, progress)
context.report = report
wizard.use_demo()
assert wizard.wait(240), "demo start-up did not finish"
assert not wizard.errors, wizard.errors
print("UPLOAD", len(uploads), uploads[-1] if uploads else None, flush=True)
wizard.run_hardware()
assert wizard.apply_workload(), wizard.workload_step.field_errors
assert wizard.run_trial(seconds=4), wizard.errors
assert wizard.wait(120), "trial did not finish"
assert not wizard.errors, wizard.errors
points = [p for p in wizard.trial_step.points if p.samples_per_s > 0]
assert points, "the trial measured nothing"
from advisor import demo
pid = demo._server.pid
print("OK", len(points), pid, flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_wizard_starts_its_own_demo_and_trials_it(tmp_path: Path) -> None:
    """The headless wizard as a user's first kernel runs it, from an empty demo cache:
    `use_demo()` generates and uploads the data in the worker thread, which then ends;
    `run_trial()` still reads from that endpoint. The endpoint is gone once the process has
    exited. The upload's progress redraws the wizard's status about a hundred times, not once
    per object: 2,000 redraws through the notebook's comm channel paced the upload in a kernel."""
    done = subprocess.run(
        [sys.executable, "-c", _WIZARD_DEMO_THEN_TRIAL],
        capture_output=True,
        text=True,
        env={**_user_env(), "LOADER_ADVISOR_DEMO_CACHE": str(tmp_path / "cache")},
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [upload] = [line.split() for line in done.stdout.splitlines() if line.startswith("UPLOAD")]
    assert 10 <= int(upload[1]) <= 150 and float(upload[2]) == 1.0, done.stdout
    ok = [line.split() for line in done.stdout.splitlines() if line.startswith("OK")]
    assert ok and int(ok[0][1]) >= 1, done.stdout
    assert _wait_gone(int(ok[0][2])), "the demo endpoint outlived the process that started it"


_PYTHON_API_FROM_A_POOL = """
from concurrent.futures import ThreadPoolExecutor
from advisor.session import AdvisorSession
session = AdvisorSession()
with ThreadPoolExecutor(1) as pool:  # the pool's thread ends when the block does
    uri = pool.submit(session.use_demo, "large").result(timeout=240)
session.run_profile()
print("OK", session.profile.object_count, flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_python_api_demo_outlives_the_thread_that_started_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PYTHON_API_FROM_A_POOL)],
        capture_output=True,
        text=True,
        env=_user_env(),
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("OK ")]
    assert counts and counts[0] > 0, done.stdout


_DEMO_THEN_WAIT = """
import time
import advisor.demo
import advisor.demo.datasets as datasets
from advisor.demo.datasets import DemoSpec
generated = []
original = datasets.iter_samples
datasets.iter_samples = lambda spec: generated.append(1) or original(spec)
started = time.monotonic()
spec = DemoSpec(images=30, image_kb=(4, 16), shard_mb=0.1, large_files=1, large_mb=0.1)
demo = advisor.demo.ensure_demo(spec, layouts=("small-images",))
print(advisor.demo._data_dir, demo.endpoint.url, bool(generated), sorted(demo.uris),
      f"{time.monotonic() - started:.1f}", flush=True)
time.sleep(120)
"""


def _demo_process(cache: Path) -> tuple[subprocess.Popen[str], list[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", _DEMO_THEN_WAIT],
        stdout=subprocess.PIPE,
        text=True,
        env={**_user_env(), "LOADER_ADVISOR_DEMO_CACHE": str(cache)},
    )
    assert child.stdout is not None
    return child, child.stdout.readline().split(maxsplit=4)


@pytest.mark.timeout(150)
def test_demo_keeps_its_data_across_processes_and_leaves_no_folder_after_sigkill(
    tmp_path: Path,
) -> None:
    """A kernel killed by Jupyter (SIGKILL, no exit handlers): the server's data folder is
    gone soon after. A second kernel puts the cached layout in without generating it, and only
    the layout asked for."""
    folders = []
    for attempt in ("first", "second"):
        child, line = _demo_process(tmp_path / "cache")
        try:
            assert len(line) == 5, f"no demo started (child exit {child.poll()})"
            folder, url, generated = Path(line[0]), line[1], line[2] == "True"
            assert folder.is_dir() and folder.name.startswith("loader-advisor-s3-")
            assert line[3] == "['small-images']"  # only the layout asked for
            assert generated == (attempt == "first"), attempt  # the second reads the cache
            folders.append(folder)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
            assert child.stdout is not None
            child.stdout.close()
        deadline = time.monotonic() + 40
        while folder.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not folder.exists(), f"the demo's data folder {folder} outlived its process"
        assert not answers(url)
    assert folders[0] != folders[1]

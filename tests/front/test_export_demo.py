"""A saved export of the demo's data runs as its docstring says, after the demo it was made on
has ended: its error says so in one line, and the demo served again by the docstring's command
on the same port reads again with the keys that command prints.

The demo here is `python -m advisor.demo serve` itself (a kernel's demo is the same server);
the test adds size flags to the docstring's command only to keep the generated data small.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import advisor.demo
from advisor.core.workload import Workload
from advisor.demo import ENV_ACCESS_KEY, ENV_SECRET_KEY, ENV_URL
from advisor.demo.server import answers
from advisor.session import AdvisorSession
from tests.export_helpers import run_exported, terminal_env

SMALL = ["--images", "24", "--shard-mb", "0.1", "--large-files", "1", "--large-mb", "1"]
READY_S = 180.0


@contextmanager
def _serve(command: str, port: int) -> Iterator[dict[str, str]]:
    """Run the docstring's serve `command` (plus SMALL) until it prints its keys; yields them."""
    args = [sys.executable, *command.removeprefix("python ").split(), *SMALL]
    assert f"--port {port}" in command, command
    process = subprocess.Popen(args, env=terminal_env({}), stdout=subprocess.PIPE, text=True)
    printed: dict[str, str] = {}
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + READY_S
        for line in process.stdout:
            found = re.match(r"(access key|secret key|S3 endpoint):\s+(\S+)", line)
            if found:
                printed[found[1]] = found[2]
            if "Ctrl-C stops" in line or time.monotonic() > deadline:
                break
        assert {"access key", "secret key", "S3 endpoint"} <= set(printed), printed
        yield printed
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_demo_export_runs_after_the_demo_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_port: int
) -> None:
    port = own_port  # held between the two demos too: the second is served on the same port
    command = f"python -m advisor.demo serve --port {port}"
    with _serve(command, port) as first:
        # the session finds this demo as a kernel finds `make lab`'s, and exports its data
        monkeypatch.setenv(ENV_URL, first["S3 endpoint"])
        monkeypatch.setenv(ENV_ACCESS_KEY, first["access key"])
        monkeypatch.setenv(ENV_SECRET_KEY, first["secret key"])
        advisor.demo.stop_demo()
        session = AdvisorSession()
        session.use_demo("small-images")
        session.set_workload(Workload(batch_size=4))
        session.run_profile()
        session.run_hardware()
        session.run_recommend()
        module, _ = session.save_export(tmp_path, "demo_loader")
        advisor.demo.stop_demo()
    assert not answers(first["S3 endpoint"])  # the demo it was made on has ended

    source = module.read_text()
    assert command in source and "python demo_loader.py" in source  # its docstring says how
    assert "from demo_loader import" in source
    gone = run_exported(module, aws={}, timeout=180)
    assert gone.returncode == 1, gone.stderr
    assert gone.stderr.count("\n") == 1 and "Traceback" not in gone.stderr, gone.stderr
    assert gone.stderr.startswith(f"error: cannot reach the demo endpoint http://127.0.0.1:{port}")
    assert command in gone.stderr

    with _serve(command, port) as again:
        assert again["S3 endpoint"] == first["S3 endpoint"]  # the same port, as exported
        keyless = run_exported(module, aws={}, timeout=180)
        assert keyless.returncode == 1 and "Traceback" not in keyless.stderr, keyless.stderr
        assert keyless.stderr.count("\n") == 1, keyless.stderr
        assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in keyless.stderr
        # the keys themselves, the ones the demo prints (a second `serve` on its port is refused)
        assert f"AWS_ACCESS_KEY_ID={again['access key']} " in keyless.stderr
        assert f"AWS_SECRET_ACCESS_KEY={again['secret key']}" in keyless.stderr
        keys = {"AWS_ACCESS_KEY_ID": again["access key"],
                "AWS_SECRET_ACCESS_KEY": again["secret key"]}  # fmt: skip
        done = run_exported(module, aws=keys, timeout=180)
        assert done.returncode == 0, done.stderr
        assert re.search(r"read 3 batches in", done.stdout), done.stdout
        assert again["secret key"] not in done.stdout + done.stderr


def test_one_demo_copy_however_many_kernels() -> None:
    """Each kernel serves the demo on a port of its own: a copy-local export of its data names
    one copy folder on every port (the demo data's version and spec, not the endpoint), while
    one URI on two endpoints of any other data is two data sets, two folders."""
    import dataclasses

    from advisor.core.location import DatasetLocation
    from advisor.decide.recommend import recommend
    from advisor.export import build_export
    from tests.builders import hardware, s3_profile

    profile, workload = s3_profile(200, 100_000), Workload(batch_size=8)
    rec = dataclasses.replace(recommend(profile, hardware(), workload), data_source="copy-local")
    uri = "s3://loader-advisor-demo/small-images/"

    def folder(port: int, demo: bool) -> str | None:
        location = DatasetLocation(uri, endpoint_url=f"http://127.0.0.1:{port}")
        return build_export(location, rec, workload, profile, demo=demo).config.local_copy_dir

    assert folder(41001, demo=True) == folder(41002, demo=True) is not None
    assert folder(41001, demo=False) != folder(41002, demo=False)
    assert folder(41001, demo=True) != folder(41001, demo=False)

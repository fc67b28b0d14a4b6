"""The trial against a user's transform that raises, fails at import or never returns, objects
that go away under its DataLoader workers, and file names no reader can open: one line naming
the object, within the budget."""

from __future__ import annotations

import io
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from torch.utils.data import DataLoader

from advisor.core.errors import describe
from advisor.core.workload import Workload
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.measure.hardware import probe_hardware
from advisor.measure.trial.data import TrialEvent
from advisor.measure.trial.deadline import HEARTBEAT_S, overrun_s
from advisor.measure.trial.run import run_trial
from native_loader import Credentials, ReaderConfig, S3IterableDataset
from native_loader.decoders import collate_list
from native_loader.sample_errors import SampleError
from tests.builders import ctrl_c_reaches_it
from tests.measure.conftest import located_profile

SPEC = DemoSpec(images=60, image_kb=(10, 20), classes=2, shard_mb=0.5, large_files=1, large_mb=1)
ROOT = Path(__file__).resolve().parents[2]

TRANSFORMS = '''
import os, time
calls = 0

def raises(data):
    raise RuntimeError("boom")

def never_returns(data):
    while True:
        time.sleep(0.05)

def hangs_later(data):
    """Returns for the decode probe's samples, then never: the 0-worker slice runs it."""
    global calls
    calls += 1
    while calls > 80:
        time.sleep(0.05)
    return bytes(data)[:10]
'''


@pytest.fixture(scope="module")
def demo(s3_endpoint: S3Endpoint) -> str:
    upload(s3_endpoint, "trial-faults", SPEC)
    return "trial-faults"


@pytest.fixture
def transforms(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "user_transforms.py").write_text(TRANSFORMS)
    (tmp_path / "broken_at_import.py").write_text("1 / 0\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in ("user_transforms", "broken_at_import"):
        sys.modules.pop(name, None)


def _jpeg(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG")
    return buffer.getvalue()


def _trial(location: Any, profile: Any, transform: str, seconds: float, **kwargs: Any) -> Any:
    return run_trial(
        location, profile, probe_hardware(), Workload(batch_size=4, transform=transform),
        seconds=seconds, **kwargs,
    )  # fmt: skip


def test_a_transform_that_raises_is_named_with_the_object(
    s3_endpoint: S3Endpoint, demo: str, transforms: Path
) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    with pytest.raises(SampleError) as info:
        _trial(location, profile, "user_transforms:raises", 5)
    line = describe(info.value)
    assert line.startswith(f"your transform failed on s3://{demo}/small-images/")
    assert line.endswith(".jpg: RuntimeError: boom")


def test_a_transform_module_that_fails_at_import_is_one_line(
    s3_endpoint: S3Endpoint, demo: str, transforms: Path
) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    with pytest.raises(ValueError) as info:
        _trial(location, profile, "broken_at_import:fn", 5)
    assert describe(info.value) == (
        "invalid input: your transform module 'broken_at_import' failed at import: "
        "ZeroDivisionError: division by zero"
    )


@pytest.mark.timing
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["never_returns", "hangs_later"])
def test_a_transform_that_never_returns_cannot_hold_the_trial_past_its_budget(
    s3_endpoint: S3Endpoint, demo: str, transforms: Path, name: str
) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    events: list[tuple[float, TrialEvent]] = []
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        _trial(
            location, profile, f"user_transforms:{name}", 5,
            progress=lambda e: events.append((time.monotonic(), e)),
        )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed <= 5 + overrun_s(5) + 2, elapsed
    assert describe(info.value).startswith("timed out: your transform has not returned after ")
    assert f"on s3://{demo}/small-images/" in str(info.value)
    assert "the trial stopped at its 5 s budget" in str(info.value)
    # never silent for long: the watch reports the transform it waits for
    times = [started] + [t for t, _ in events]
    assert max(b - a for a, b in itertools.pairwise(times)) < HEARTBEAT_S + 1.5
    assert any("your transform has run for" in e.message for _, e in events)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_an_object_deleted_under_a_dataloader_worker_is_named(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    for i in range(8):
        s3_client.put_object(Bucket=s3_bucket, Key=f"x/{i}.bin", Body=b"x" * 100)
    config = ReaderConfig(endpoint_url=s3_endpoint.url, region=s3_endpoint.region)
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    dataset = S3IterableDataset(f"s3://{s3_bucket}/x/", config=config, credentials=credentials)
    dataset.uris()
    s3_client.delete_object(Bucket=s3_bucket, Key="x/5.bin")
    loader = DataLoader(
        dataset, batch_size=2, num_workers=1, collate_fn=collate_list,
        multiprocessing_context="fork",
    )  # fmt: skip
    with pytest.raises(FileNotFoundError) as info:
        list(loader)
    assert str(info.value).startswith("Caught FileNotFoundError in DataLoader worker process 0")
    line = describe(info.value)
    assert line.startswith("not found: NoSuchKey (HTTP 404") and f"s3://{s3_bucket}/x/5.bin" in line


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{cwd}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "advisor", *argv, "--quiet"],
        capture_output=True, text=True, timeout=60, env=env, cwd=cwd, check=False,
    )  # fmt: skip


def test_the_cli_says_which_object_your_transform_failed_on(
    s3_endpoint: S3Endpoint, demo: str, transforms: Path
) -> None:
    done = _cli(
        "trial", f"s3://{demo}/small-images/", "--endpoint-url", s3_endpoint.url,
        "--transform", "user_transforms:raises", "--seconds", "5", cwd=transforms,
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: your transform failed on s3://{demo}/small-images/")
    assert line.endswith(": RuntimeError: boom")


def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for i in range(5):
        (folder / f"{i}.bin").write_bytes(os.urandom(2000))
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.bin"), "wb") as f:
        f.write(os.urandom(2000))
    done = _cli("trial", str(folder), "--seconds", "3", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: reading {folder}/caf\\xe9.bin failed: its file name is not valid UTF-8; "
        "rename the file"
    ]


@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("marker", ["the sweep reads with", "num_workers=2"])
def test_ctrl_c_during_the_trial_unwinds_it_and_leaves_no_process(
    tmp_path: Path, marker: str
) -> None:
    """The measurements run in a watched thread: Ctrl-C must still close their loaders before
    the process exits (a thread left reading at exit aborted the interpreter)."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(200):
        (folder / f"{i:03d}.jpg").write_bytes(_jpeg(i))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "advisor", "trial", str(folder), "--seconds", "30"]
    with subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=ctrl_c_reaches_it,
    ) as proc:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if marker in line:
                break
        workers = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=10) == 130, [*seen, rest]
        assert time.monotonic() - started < 2.0
    assert rest.strip().splitlines()[-1] == "error: interrupted", rest
    time.sleep(0.5)
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")]

"""advisor.diagnose and advisor.compare: real loaders (generators, a DataLoader with workers,
boto3 over the local S3 server) in a real loop, checked against the loop timed from outside."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

import advisor
from advisor.core.bounds import LoopLimits
from advisor.demo.server import S3Endpoint
from advisor.diagnosis import as_step, compare, diagnose
from advisor.measure.hardware.host import child_pids
from advisor.measure.loop.run import LoaderEmpty, LoaderFailed, LoaderHung, batch_samples
from advisor.report.diagnosis import comparison_headline, diagnosis_lines

QUICK = LoopLimits(max_batches=40, max_seconds=1.5, batch_timeout_s=5, first_batch_timeout_s=10)
# for tests that need the loader's whole epoch counted: on a busy machine it can outlast 1.5 s
WHOLE_EPOCH = replace(QUICK, max_seconds=30.0)


class SlowBatches:
    """A re-iterable loader whose every batch of `size` samples takes `seconds` to load."""

    def __init__(self, seconds: float, size: int = 8, batches: int = 1000) -> None:
        self.seconds, self.size, self.batches = seconds, size, batches

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(self.batches):
            time.sleep(self.seconds)
            yield list(range(i, i + self.size))


@pytest.mark.timing
def test_a_loader_as_slow_as_the_step_waits_half_of_each_step() -> None:
    result = diagnose(SlowBatches(0.02), seconds_per_batch=0.02, limits=QUICK)
    s = result.summary
    assert s.wait_share is not None and 0.35 < s.wait_share.median < 0.65
    assert s.samples_per_s is not None and 130 < s.samples_per_s.median < 230  # 8 / 40 ms
    assert s.headspace_samples_per_s is not None
    assert 300 < s.headspace_samples_per_s.median < 450  # 8 / 20 ms: the step alone
    assert 0.015 < s.time_to_first_batch_s < 0.5
    assert s.ended == "seconds" and s.batches > 10
    assert result.verdict is not None and result.verdict.level == "highly input-bound"
    assert result.verdict.line.startswith("input-bound: ")
    assert "over 20%: highly input-bound" in result.verdict.line


@pytest.mark.timing
def test_a_loader_faster_than_the_step_is_not_input_bound() -> None:
    result = diagnose(SlowBatches(0.0), seconds_per_batch=0.02, limits=QUICK)
    assert result.verdict is not None and result.verdict.level == "not input-bound"
    assert result.summary.wait_share is not None and result.summary.wait_share.median < 0.05


class WaitingDataset(torch.utils.data.Dataset[int]):
    """Each sample waits 5 ms and uses no CPU: a read that waits on storage or the network."""

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, index: int) -> int:
        time.sleep(0.005)
        return index


def _waiting_loader() -> torch.utils.data.DataLoader[int]:
    return torch.utils.data.DataLoader(WaitingDataset(), batch_size=8, num_workers=0)


@pytest.mark.timing
@pytest.mark.slow
def test_a_loader_function_gets_the_diagnosis_of_the_loader_it_makes() -> None:
    """The same DataLoader as a variable and as a function that makes it: the function's
    loader is known by what it made, so both are named as waiting on storage."""
    lines: list[str] = []
    for _ in range(3):  # other work on a shared machine can make a run "cannot tell"
        results = [
            diagnose(loader, seconds_per_batch=0.01, limits=QUICK)
            for loader in (_waiting_loader(), _waiting_loader)
        ]
        limits = [r.bottleneck for r in results]
        lines = [limit.line if limit is not None else "none" for limit in limits]
        if all(limit is not None and limit.stage == "storage" for limit in limits):
            break
    assert all("waits on storage or network latency" in line for line in lines), lines


def test_the_users_step_is_called_with_every_batch_and_the_limit_holds() -> None:
    seen: list[Any] = []
    limits = LoopLimits(max_batches=12, max_seconds=30, replay_batches=3)
    result = diagnose(SlowBatches(0.0, size=4), step=seen.append, limits=limits)
    assert result.summary.batches == 12 and result.summary.ended == "batches"
    # 12 in the loop, then the 11 after the first replayed on the first three it kept
    assert len(seen) == 23 and seen[12:15] == seen[0:3] and seen[15] == seen[0]
    assert result.summary.samples == 48
    assert seen[1] == [1, 2, 3, 4]


def test_a_dataloader_with_workers_reports_memory_cpu_and_leaves_no_process() -> None:
    class Items(torch.utils.data.Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 10_000

        def __getitem__(self, i: int) -> torch.Tensor:
            end = time.process_time() + 0.002  # 2 ms of CPU per sample in the worker
            while time.process_time() < end:
                pass
            return torch.full((64,), i)

    before = child_pids()
    loader = torch.utils.data.DataLoader(Items(), batch_size=16, num_workers=2)
    result = diagnose(loader, consumer_rate=2000, limits=QUICK)
    s = result.summary
    assert s.samples_per_s is not None and s.samples_per_s.median > 0
    assert s.loader_cpu_s_per_sample is not None and 0.001 < s.loader_cpu_s_per_sample < 0.02
    assert s.peak_rss_bytes > 50 * 2**20  # this process and two workers with torch loaded
    assert s.gpu_utilization is None  # no GPU here
    deadline = time.monotonic() + 10
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "the DataLoader's workers were left running"


def test_a_loader_that_raises_is_named_with_its_batch() -> None:
    def broken() -> Iterator[list[int]]:
        yield [1]
        yield [2]
        raise RuntimeError("disk on fire")

    with pytest.raises(LoaderFailed, match=r"raised on batch 3: RuntimeError: disk on fire") as e:
        diagnose(broken(), seconds_per_batch=0.001, limits=QUICK)
    assert isinstance(e.value.__cause__, RuntimeError)


def test_a_worker_killed_as_the_oom_killer_kills_is_named_as_the_exported_loader_names_it() -> None:
    """The user's own DataLoader, one of its workers SIGKILLed mid-epoch: the loop's error names
    the worker, the signal and the likely cause with the workers' measured memory, in the words
    of the exported loader (`native_loader.worker_death.explain`)."""

    class Items(torch.utils.data.Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 10_000

        def __getitem__(self, i: int) -> torch.Tensor:
            time.sleep(0.005)
            return torch.full((64,), i)

    before = child_pids()
    killed: list[int] = []

    def step(batch: Any) -> None:
        if len(killed) == 0 and batch[0][0] >= 32:  # a few batches in: mid-epoch
            killed.append(max(child_pids() - before))
            os.kill(killed[0], signal.SIGKILL)

    loader = torch.utils.data.DataLoader(Items(), batch_size=16, num_workers=2)
    limits = replace(QUICK, max_seconds=30.0, batch_timeout_s=20)
    with pytest.raises(LoaderFailed) as e:
        diagnose(loader, step, limits=limits)
    message = str(e.value)
    assert re.match(
        rf"your loader failed on batch \d+: DataLoader worker [01] \(pid {killed[0]}\) was "
        r"killed by SIGKILL, as the kernel's out-of-memory killer kills: likely out of memory; "
        r"the workers' measured peak resident memory: \d+ MiB at most in one, ",
        message,
    ), message
    assert "lower num_workers, prefetch_factor or batch_size" in message
    died = e.value.__cause__
    # torch's words, or the connection the worker reset, killed as its batch was taken
    assert died is not None and (
        isinstance(died.__cause__, ConnectionError) or "DataLoader worker" in str(died.__cause__)
    )
    deadline = time.monotonic() + 10
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "the DataLoader's workers were left running"


def test_a_loader_that_yields_nothing_is_refused() -> None:
    with pytest.raises(LoaderEmpty, match="yielded no batch"):
        diagnose([], seconds_per_batch=0.01, limits=QUICK)


@pytest.mark.timing
def test_a_hung_loader_is_reported_within_its_bound() -> None:
    release = threading.Event()

    def stuck() -> Iterator[list[int]]:
        yield [1]
        release.wait(60)
        yield [2]

    limits = LoopLimits(max_batches=10, max_seconds=10, batch_timeout_s=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(LoaderHung, match=r"no batch 2 within 1 s: it looks hung"):
            diagnose(stuck(), seconds_per_batch=0.001, limits=limits)
        assert time.monotonic() - started < 4
    finally:
        release.set()


class HangingDataset(torch.utils.data.Dataset[int]):
    """Item 0 comes at once; every other item hangs its worker for a minute."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> int:
        if index > 0:
            time.sleep(60)
        return index


@pytest.mark.slow
def test_a_hung_dataloader_leaves_no_workers_behind() -> None:
    """A notebook lives on after the loop gave up on a hung DataLoader: its workers go when the
    loop gives up, not when the process ends."""
    before = child_pids()
    loader = torch.utils.data.DataLoader(HangingDataset(), batch_size=1, num_workers=2)
    limits = LoopLimits(max_batches=10, max_seconds=10, batch_timeout_s=1.0)
    with pytest.raises(LoaderHung):
        diagnose(loader, seconds_per_batch=0.001, limits=limits)
    deadline = time.monotonic() + 8
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "the hung DataLoader's workers were left running"


def test_compare_names_the_loader_that_failed() -> None:
    def broken() -> Iterator[list[int]]:
        yield [1]
        raise RuntimeError("disk on fire")

    with pytest.raises(LoaderFailed, match=r"^the recommended loader raised on batch 2"):
        compare([[1]] * 20, broken(), seconds_per_batch=0.001, limits=QUICK, rounds=1)


def test_cancel_ends_the_loop_with_what_was_measured() -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    limits = LoopLimits(max_batches=10_000, max_seconds=60)
    result = diagnose(SlowBatches(0.01), seconds_per_batch=0.01, limits=limits, cancel=cancel)
    assert result.summary.ended == "cancelled" and result.summary.batches > 5


def test_progress_is_reported() -> None:
    events: list[float] = []
    diagnose(SlowBatches(0.0), seconds_per_batch=0.005, limits=QUICK,
             progress=lambda e: events.append(e.fraction))  # fmt: skip
    assert events and events == sorted(events) and 0 < events[-1] <= 1


def test_exactly_one_step_is_required() -> None:
    with pytest.raises(ValueError, match="exactly one step"):
        as_step()
    with pytest.raises(ValueError, match="exactly one step"):
        as_step(print, seconds_per_batch=1.0)
    with pytest.raises(ValueError, match="seconds_per_batch"):
        as_step(seconds_per_batch=-1)
    with pytest.raises(TypeError, match="callable"):
        as_step(3.0)  # type: ignore[arg-type]


def test_batch_samples_counts_what_collate_makes() -> None:
    assert batch_samples(torch.zeros(5, 3)) == 5
    assert batch_samples((torch.zeros(7, 3, 2), torch.zeros(7))) == 7
    assert batch_samples({"image": torch.zeros(3, 2), "label": torch.zeros(3)}) == 3
    assert batch_samples([torch.zeros(10, 10), torch.zeros(12, 10)]) == 2  # a list of samples
    assert batch_samples([b"a", b"b", b"c"]) == 3
    assert batch_samples(b"one object") == 1


@pytest.mark.timing
@pytest.mark.slow
def test_compare_puts_two_loaders_through_the_same_step() -> None:
    result = compare(SlowBatches(0.03), SlowBatches(0.0), seconds_per_batch=0.01, limits=QUICK)
    assert len(result.before) == len(result.after) == 2
    speedup = result.speedup
    assert speedup is not None and 2.8 < speedup.median < 5.0  # 40 ms a batch against 10 ms
    line = comparison_headline(result, "num_workers 0 -> 2")
    assert line.startswith("num_workers 0 -> 2: ") and "samples/s" in line
    assert "data wait" in line and "of each step" in line


def test_the_package_offers_diagnose_and_compare() -> None:
    assert advisor.diagnose is diagnose and advisor.compare is compare


@pytest.mark.timing
def test_the_waiting_share_agrees_with_the_loop_timed_from_outside(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    """A plain boto3 `__getitem__` dataset (the tutorial loader) over the local S3 server, with
    a fixed step. The same loop is timed from outside: a wrapper around the loader times each
    `next()`, the step times itself; the share diagnose reports must agree with theirs."""
    for i in range(64):
        s3_client.put_object(Bucket=s3_bucket, Key=f"obj/{i:03d}", Body=bytes(50_000))

    class Boto3Objects(torch.utils.data.Dataset[bytes]):
        def __init__(self) -> None:
            self.client = s3_endpoint.boto3_client()

        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> bytes:
            body = self.client.get_object(Bucket=s3_bucket, Key=f"obj/{i % 64:03d}")["Body"]
            return bytes(body.read())

    loader = torch.utils.data.DataLoader(Boto3Objects(), batch_size=8, collate_fn=list)
    inside: list[float] = []
    stepped: list[float] = []

    def timed() -> Iterator[list[bytes]]:
        iterator = iter(loader)
        while True:
            asked = time.monotonic()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            inside.append(time.monotonic() - asked)
            yield batch

    def step(batch: list[bytes]) -> None:
        started = time.monotonic()
        time.sleep(0.02)
        stepped.append(time.monotonic() - started)

    limits = LoopLimits(max_batches=8, max_seconds=10, replay_batches=0)
    summary = diagnose(timed(), step=step, limits=limits).summary
    loop_waits, loop_steps = inside[1:8], stepped[1:8]  # after the first batch, as reported
    outside = sum(loop_waits) / (sum(loop_waits) + sum(loop_steps))
    assert summary.batches == 8 and len(loop_waits) == 7
    assert summary.overall_wait_share is not None
    assert abs(summary.overall_wait_share - outside) < 0.10


USER_MODULE = """
import time

def make_loader():
    def batches():
        for i in range(10_000):
            time.sleep(0.01)
            yield [i] * 8
    return batches()

def broken():
    raise RuntimeError("no bucket configured")
"""


def _cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor", "diagnose", *args], cwd=cwd, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.timing
@pytest.mark.slow
def test_the_cli_diagnoses_a_loader_function(tmp_path: Path) -> None:
    (tmp_path / "user_loader.py").write_text(USER_MODULE)
    done = _cli(["user_loader:make_loader", "--step-time", "0.01", "--seconds", "1", "--json"],
                tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    share = result["summary"]["wait_share"]["median"]
    assert 0.3 < share < 0.7 and result["verdict"]["level"] == "highly input-bound"
    text = _cli(["user_loader:make_loader", "--step-time", "0.01", "--seconds", "1"], tmp_path)
    assert text.returncode == 0 and "of each step waits for data" in text.stdout
    assert "samples/s in the loop" in text.stdout and "Traceback" not in text.stderr


@pytest.mark.slow
def test_the_cli_names_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "user_loader.py").write_text(USER_MODULE)
    cases = {
        ("no_such_module:f", "--step-time", "0.01"): "cannot import loader module 'no_such_module'",
        ("user_loader:nope", "--step-time", "0.01"): "has no attribute 'nope'",
        ("user_loader:broken", "--step-time", "0.01"): "RuntimeError: no bucket configured",
        ("user_loader:make_loader", "--step-time", "-1"): (
            "--step-time must be more than 0 and at most 3,600 s, got -1"
        ),
        ("user_loader:make_loader",): "one of the arguments --step --step-time --consumer-rate",
    }
    for args, message in cases.items():
        done = _cli(list(args), tmp_path)
        assert done.returncode in (1, 2), (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_magic_diagnoses_a_notebook_variable(capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "advisor")
        shell.user_ns["my_loader"] = SlowBatches(0.005)
        shell.run_line_magic("advisor", "diagnose my_loader --step-time 0.01 --seconds 1 --quiet")
        out = capsys.readouterr().out
        assert "of each step waits for data" in out and "samples/s in the loop" in out
        shell.run_line_magic("advisor", "diagnose nothing_here --step-time 0.01")
        assert "no variable named 'nothing_here'" in capsys.readouterr().out
        # its progress is the notebook's plain output, not stderr (a pink box per line there)
        shell.run_line_magic("advisor", "diagnose my_loader --step-time 0.01 --seconds 2")
        said = capsys.readouterr()
        assert "... your loader: " in said.out and said.err == "", said
    finally:
        InteractiveShell.clear_instance()


def test_before_after_through_the_cli_on_s3(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """The user's path: a tutorial boto3 loader of their own, `--uri` to the same data; the
    advisor runs its trial, exports, and both loaders go through the same step."""
    for i in range(96):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin", Body=bytes(40_000))
    (tmp_path / "boto3_loader.py").write_text(f"""
import boto3, torch

class Objects(torch.utils.data.Dataset):
    def __init__(self):
        self.client = None
    def __len__(self):
        return 96
    def __getitem__(self, i):
        if self.client is None:
            self.client = boto3.client("s3", endpoint_url={s3_endpoint.url!r})
        key = f"data/{{i:03d}}.bin"
        return self.client.get_object(Bucket={s3_bucket!r}, Key=key)["Body"].read()

def make_loader():
    return torch.utils.data.DataLoader(Objects(), batch_size=8, collate_fn=list)
""")
    done = _cli(
        ["boto3_loader:make_loader", "--step-time", "0.02", "--seconds", "2", "--json",
         "--uri", f"s3://{s3_bucket}/data/", "--endpoint-url", s3_endpoint.url,
         "--trial-seconds", "6"],
        tmp_path, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    headline = result["headline"]
    assert "num_workers 0 ->" in headline[0] or "the native reader" in headline[0]
    assert "samples/s" in headline[0] and "data wait" in headline[0]
    assert headline[1].startswith("before: ") and headline[2].startswith("after: ")
    comparison = result["comparison"]
    assert len(comparison["before"]) == len(comparison["after"]) == 2
    assert all(r > 0 for r in comparison["ratios"])


def test_what_a_sample_policy_skipped_is_in_the_diagnosis(tmp_path: Path) -> None:
    import io

    import numpy as np
    from PIL import Image

    from native_loader import S3IterableDataset
    from native_loader.decoders import collate_list, decode_image
    from native_loader.sample_errors import SamplePolicy

    for i in range(40):
        buffer = io.BytesIO()
        pixels = np.random.default_rng(i).integers(0, 255, (8, 8, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(buffer, "JPEG")
        data = b"this is no jpeg" if i == 7 else buffer.getvalue()
        (tmp_path / f"img_{i:02d}.jpg").write_bytes(data)
    dataset = S3IterableDataset(
        f"{tmp_path}/", transform=decode_image, on_error=SamplePolicy("skip", 0.5)
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=collate_list)
    result = diagnose(loader, seconds_per_batch=0.001, limits=WHOLE_EPOCH)
    assert result.summary.ended == "epoch"
    assert "skipped: 1 of 40" in " ".join(result.summary.notes)
    assert any("skipped: 1 of 40" in line for line in diagnosis_lines(result))


def test_throttling_the_readers_met_is_in_the_diagnosis(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    from native_loader import Credentials, ReaderConfig, S3IterableDataset
    from testing import FaultProxy, Faults, When

    for i in range(30):
        s3_client.put_object(Bucket=s3_bucket, Key=f"d/{i:02d}", Body=bytes([i]) * 100)
    keys = s3_endpoint.credentials
    with FaultProxy(s3_endpoint.url, faults=Faults(slow_down=When(every_n=6))) as proxy:
        dataset = S3IterableDataset(
            f"s3://{s3_bucket}/d/",
            config=ReaderConfig(endpoint_url=proxy.url, region=s3_endpoint.region),
            credentials=Credentials(keys.access_key, keys.secret_key),
        )
        loader = torch.utils.data.DataLoader(dataset, batch_size=None)
        # each throttled read backs off before its retry
        result = diagnose(loader, seconds_per_batch=0.001, limits=WHOLE_EPOCH)
        injected = proxy.stats().faults_injected["slow_down"]
    assert result.summary.ended == "epoch"
    note = f"the storage throttled {injected:,} requests (503 SlowDown"
    assert injected > 0 and any(note in line for line in result.summary.notes)

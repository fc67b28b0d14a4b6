"""Re-shard under faults injected outside the code under test (the project's proxy), a real
process killed mid-way, and torchrun with two processes."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.proxy import NetworkProfile, Proxy
from advisor.demo.server import S3Endpoint
from advisor.reshard import ReshardConfig, reshard, verify
from testing import FaultProxy, Faults, When
from tests.builders import ctrl_c_reaches_it
from tests.reshard.conftest import (
    SHARD,
    digests,
    environ,
    make_files,
    s3_shards,
    upload,
    write_local,
)

CONFIG = ReshardConfig(shard_size=SHARD, seed=5)


def test_slowdown_bursts_and_resets_on_reads_and_writes_are_retried(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: Any
) -> None:
    src = upload(s3_client, s3_bucket, "src/", make_files(60))
    reshard(src, f"s3://{s3_bucket}/clean/", CONFIG, endpoint_url=s3_endpoint.url)
    faults = Faults(
        slow_down=When(requests=range(10, 16), every_n=17, methods=("GET", "PUT")),
        reset=When(every_n=23),
        truncate=When(every_n=29),
    )
    with FaultProxy(s3_endpoint.url, faults=faults, io_timeout_s=10) as proxy:
        result = reshard(src, f"s3://{s3_bucket}/faulty/", CONFIG, endpoint_url=proxy.url)
        injected = proxy.stats().faults_injected
    assert result.index_url is not None
    assert injected.get("slow_down", 0) >= 6 and injected.get("reset", 0) >= 1
    assert result.retries >= 1
    clean = s3_shards(s3_client, s3_bucket, "clean/")
    assert digests(s3_shards(s3_client, s3_bucket, "faulty/")) == digests(clean)
    assert verify(f"s3://{s3_bucket}/faulty/", endpoint_url=s3_endpoint.url).ok


def test_a_source_that_keeps_failing_gives_a_clear_error_and_no_index(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: Any
) -> None:
    src = upload(s3_client, s3_bucket, "src/", make_files(30))
    config = ReshardConfig(shard_size=SHARD)
    # GETs 1-4 are the manifest check, the destination and source listings; then every read
    # fails (reset: a SlowDown storm would be waited out for the reader's max_throttled_s)
    faults = Faults(reset=When(after_n=4))
    with (
        FaultProxy(s3_endpoint.url, faults=faults) as proxy,
        pytest.raises(ConnectionError),
    ):
        reshard(src, f"s3://{s3_bucket}/out/", config, endpoint_url=proxy.url)
    names = [
        o["Key"]
        for o in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="out/").get("Contents", [])
    ]
    assert "out/shards.json" not in names and not any(n.endswith(".tar") for n in names)


def _done_markers(client: Any, bucket: str, prefix: str) -> int:
    listing = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}_reshard/done/")
    return len(listing.get("Contents", []))


@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill", "ctrl-c"])
def test_a_killed_process_resumes_to_the_same_bytes(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: Any, how: signal.Signals
) -> None:
    src = upload(s3_client, s3_bucket, "src/", make_files(240))
    reshard(src, f"s3://{s3_bucket}/whole/", CONFIG, endpoint_url=s3_endpoint.url)
    with Proxy(s3_endpoint.url, network=NetworkProfile(latency_ms=20)) as proxy:
        argv = [
            sys.executable,
            "-m",
            "advisor",
            "reshard",
            src,
            f"s3://{s3_bucket}/killed/",
            "--shard-size",
            str(SHARD),
            "--seed",
            "5",
            "--read-concurrency",
            "2",
            "--endpoint-url",
            proxy.url,
            "--quiet",
        ]
        with subprocess.Popen(
            argv, env=environ(), stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it
        ) as process:
            deadline = time.monotonic() + 60
            while _done_markers(s3_client, s3_bucket, "killed/") < 1:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "no shard committed in 60 s"
                time.sleep(0.05)
            process.send_signal(how)
            _, stderr = process.communicate(timeout=30)
    if how == signal.SIGINT:  # Ctrl-C: shards being written finish their commit, then exit 130
        assert process.returncode == 130, stderr
        assert stderr.strip().splitlines()[-1].startswith("error: interrupted")
    committed = _done_markers(s3_client, s3_bucket, "killed/")
    total = len(s3_shards(s3_client, s3_bucket, "whole/"))
    assert 1 <= committed < total, "the kill should land mid-way"
    head = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="killed/shards.json")
    assert not head.get("Contents"), "no index may be published before every shard is committed"
    result = reshard(src, f"s3://{s3_bucket}/killed/", CONFIG, endpoint_url=s3_endpoint.url)
    assert result.shards_skipped == committed and result.index_url
    assert not s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads")
    whole = digests(s3_shards(s3_client, s3_bucket, "whole/"))
    assert digests(s3_shards(s3_client, s3_bucket, "killed/")) == whole


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_torchrun_two_processes_write_the_same_shards(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert torchrun, "torch ships torchrun"
    src = write_local(tmp_path / "src", make_files(90))
    reshard(str(src), str(tmp_path / "one"), CONFIG)
    argv = [
        torchrun,
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "advisor",
        "reshard",
        str(src),
        str(tmp_path / "two"),
        "--shard-size",
        str(SHARD),
        "--seed",
        "5",
        "--json",
    ]
    done = subprocess.run(argv, env=environ(), capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-2000:]
    results = [
        json.loads(line)["result"]
        for line in done.stdout.splitlines()
        if line.startswith('{"result"')
    ]
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert {r["world_size"] for r in results} == {2}
    assert all(r["shards_written"] >= 1 for r in results)
    one = {p.name: p.read_bytes() for p in (tmp_path / "one").glob("*.tar")}
    two = {p.name: p.read_bytes() for p in (tmp_path / "two").glob("*.tar")}
    assert digests(one) == digests(two)
    assert (tmp_path / "two" / "shards.json").exists()

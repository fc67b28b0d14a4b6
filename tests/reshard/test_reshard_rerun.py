"""A re-shard rerun after things went wrong in between: a source that changed since the plan, a
destination that resolves into the source, leftovers of a killed run, a rank waiting for rank 0."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from advisor.reshard import PlanError, ReshardConfig, ReshardEvent, reshard, verify
from advisor.reshard.cli import _Bar
from tests.reshard.conftest import (
    SHARD,
    digests,
    local_shards,
    make_files,
    upload,
    write_local,
)

CONFIG = ReshardConfig(shard_size=SHARD, seed=11)


def _plan_only(src: str, dst: str, **where: Any) -> None:
    """Save the plan at `dst` and stop before any shard: a run interrupted right after planning."""
    cancel = threading.Event()

    def stop_once_planned(event: ReshardEvent) -> None:
        if event.kind == "plan":
            cancel.set()

    result = reshard(src, dst, CONFIG, cancel=cancel, progress=stop_once_planned, **where)
    assert result.cancelled and result.shards_written == 0


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout)


def test_a_local_file_that_changed_size_since_the_plan_is_refused(tmp_path: Path) -> None:
    src, dst = write_local(tmp_path / "src", make_files()), tmp_path / "dst"
    _plan_only(str(src), str(dst))
    changed = src / "class_1" / "img_0004.jpg"
    planned = changed.stat().st_size
    changed.write_bytes(b"x" * 1234)
    with pytest.raises(OSError, match=r"img_0004\.jpg: the object changed since the plan") as info:
        reshard(str(src), str(dst), CONFIG)
    assert f"its size is 1234 bytes, not the {planned} expected" in str(info.value)
    assert not (dst / "shards.json").exists()


@pytest.mark.parametrize("how", ["inside", "symlink"])
def test_a_destination_inside_the_source_is_refused(tmp_path: Path, how: str) -> None:
    src = write_local(tmp_path / "src", make_files(12))
    if how == "inside":
        dst = src / "class_0" / "shards"
    else:
        (src / "out").mkdir()
        (tmp_path / "elsewhere").symlink_to(src / "out")
        dst = tmp_path / "elsewhere" / "shards"
    with pytest.raises(PlanError, match="lies inside the source"):
        reshard(str(src), str(dst), CONFIG)
    assert not list(src.rglob("*.tar")) and not list(src.rglob("manifest.json"))


def test_a_symlinked_source_is_resolved_too(tmp_path: Path) -> None:
    src = write_local(tmp_path / "src", make_files(12))
    (tmp_path / "link").symlink_to(src)
    with pytest.raises(PlanError, match="lies inside the source"):
        reshard(str(tmp_path / "link"), str(src / "out"), CONFIG)


def test_a_rerun_removes_the_temp_files_a_killed_run_left(tmp_path: Path) -> None:
    src, dst = write_local(tmp_path / "src", make_files()), tmp_path / "dst"
    _plan_only(str(src), str(dst))
    dead, events = _dead_pid(), []
    leftovers = [
        dst / f".shard-000000.tar.{dead}.tmp",
        dst / f".shard-000002.tar.{dead}.tmp",
        dst / "_reshard" / "done" / f".shard-000001.tar.json.{dead}.tmp",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half a shard")
    live = dst / f".shard-000001.tar.{os.getppid()}.tmp"  # a writer still running
    live.write_bytes(b"in progress")
    result = reshard(str(src), str(dst), CONFIG, progress=events.append)
    assert result.cleaned == 3 and result.index_url
    assert not any(p.exists() for p in leftovers) and live.exists()
    assert [e.message for e in events if e.kind == "cleanup"] == [
        "cleaned up 3 temp files an interrupted run left"
    ]
    live.unlink()
    assert verify(str(dst)).ok
    reshard(str(src), str(tmp_path / "whole"), CONFIG)
    assert digests(local_shards(dst)) == digests(local_shards(tmp_path / "whole"))


def test_a_rerun_aborts_the_multipart_uploads_a_killed_run_left(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: Any
) -> None:
    src = upload(s3_client, s3_bucket, "src/", make_files(30))
    dst = f"s3://{s3_bucket}/out/"
    _plan_only(src, dst, endpoint_url=s3_endpoint.url)
    for key in ("out/shard-000000.tar", "out/shard-000001.tar", "elsewhere/keep.bin"):
        upload_id = s3_client.create_multipart_upload(Bucket=s3_bucket, Key=key)["UploadId"]
        s3_client.upload_part(
            Bucket=s3_bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"p" * 5 * 2**20
        )
    events: list[ReshardEvent] = []
    result = reshard(src, dst, CONFIG, endpoint_url=s3_endpoint.url, progress=events.append)
    assert result.cleaned == 2 and result.index_url
    assert [e.message for e in events if e.kind == "cleanup"] == [
        "cleaned up 2 incomplete multipart uploads an interrupted run left"
    ]
    left = s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])
    assert [u["Key"] for u in left] == ["elsewhere/keep.bin"]  # not the re-shard's to abort
    assert verify(dst, endpoint_url=s3_endpoint.url).ok


def test_rank_1_says_once_that_it_waits_for_rank_0_and_for_how_long(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_local(tmp_path / "src", make_files(12))
    bar = _Bar(quiet=False, as_json=False)
    events: list[ReshardEvent] = []

    def both(event: ReshardEvent) -> None:
        events.append(event)
        bar(event)

    config = ReshardConfig(shard_size=SHARD, manifest_wait_s=1.5)
    with pytest.raises(TimeoutError, match="from rank 0"):
        reshard(str(src), str(tmp_path / "dst"), config, rank=1, world_size=2, progress=both)
    assert [e.kind for e in events] == ["wait"]
    assert "rank 1: waiting up to 1.5 s for rank 0's plan" in capsys.readouterr().err


def test_a_file_name_that_is_not_utf8_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    src = write_local(tmp_path / "src", make_files(12))
    with open(os.path.join(os.fsencode(src / "class_0"), b"caf\xe9.jpg"), "wb") as f:
        f.write(b"x" * 100)
    with pytest.raises(ValueError, match=r"caf\\xe9\.jpg failed: its file name is not valid UTF-8"):
        reshard(str(src), str(tmp_path / "dst"), CONFIG)
    assert not (tmp_path / "dst").exists()

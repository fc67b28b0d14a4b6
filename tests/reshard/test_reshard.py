"""The re-shard engine on local folders and the real S3 endpoint: contents, determinism across
process counts, ranks and finalize, resume, verify, and every kind of bad input."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from advisor.demo.server import S3Endpoint
from advisor.reshard import PlanError, ReshardConfig, ReshardEvent, finalize, reshard, verify
from advisor.reshard.config import parse_size
from native_loader import Credentials
from tests.reshard.conftest import (
    SHARD,
    digests,
    local_shards,
    make_files,
    s3_shards,
    samples_of,
    upload,
    write_local,
)

CONFIG = ReshardConfig(shard_size=SHARD, seed=3)


def test_local_shards_hold_every_file_once_with_labels(tmp_path: Path) -> None:
    files = make_files()
    src = write_local(tmp_path / "src", files)
    events: list[ReshardEvent] = []
    result = reshard(str(src), str(tmp_path / "dst"), CONFIG, progress=events.append)
    assert result.index_url and result.shards_written == result.shards_total > 1
    shards = local_shards(tmp_path / "dst")
    samples = samples_of(shards)
    classes = json.loads((tmp_path / "dst" / "classes.json").read_text())
    assert classes == ["class_0", "class_1", "class_2"]
    assert len(samples) == 60
    for key, data in files.items():
        stem, ext = key.split(".", 1)
        assert samples[stem][ext] == data
        assert samples[stem]["cls"] == str(classes.index(stem.split("/")[0])).encode()
    index = json.loads((tmp_path / "dst" / "shards.json").read_text())
    assert sum(s["nsamples"] for s in index["shardlist"]) == 60
    assert [Path(s["url"]).name for s in index["shardlist"]] == sorted(shards)
    assert all(len(d) <= SHARD for d in shards.values())
    assert {e.kind for e in events} >= {"plan", "shard", "done", "finalized"}
    assert events[-1].kind == "finalized"
    assert verify(str(tmp_path / "dst")).ok


def test_metadata_below_the_source_is_not_packed(tmp_path: Path) -> None:
    """The datasets skip `_`/`.` names below the listed prefix; the shards must hold the same."""
    files = make_files(12)
    extra = {"_tmp/img_9000.jpg": b"partial", ".cache/img_9001.jpg": b"x", "_SUCCESS": b""}
    src = write_local(tmp_path / "src", {**files, **extra})
    reshard(str(src), str(tmp_path / "dst"), CONFIG)
    samples = samples_of(local_shards(tmp_path / "dst"))
    assert len(samples) == 12 and not any("9000" in k or "9001" in k for k in samples)


def test_same_bytes_whatever_the_rank_split_and_seed_changes_them(tmp_path: Path) -> None:
    src = write_local(tmp_path / "src", make_files())
    reshard(str(src), str(tmp_path / "one"), CONFIG)
    for rank in range(3):
        reshard(str(src), str(tmp_path / "three"), CONFIG, rank=rank, world_size=3)
    one, three = local_shards(tmp_path / "one"), local_shards(tmp_path / "three")
    assert digests(one) == digests(three)
    reshard(str(src), str(tmp_path / "other"), ReshardConfig(shard_size=SHARD, seed=4))
    assert digests(local_shards(tmp_path / "other")) != digests(one)
    assert samples_of(local_shards(tmp_path / "other")).keys() == samples_of(one).keys()


def test_ranks_write_their_shards_and_the_last_one_the_index(tmp_path: Path) -> None:
    src, dst = write_local(tmp_path / "src", make_files()), tmp_path / "dst"
    first = reshard(str(src), str(dst), CONFIG, rank=0, world_size=2)
    assert first.index_url is None and not (dst / "shards.json").exists()
    names = sorted(local_shards(dst))
    assert names and all(int(n[6:12]) % 2 == 0 for n in names)
    with pytest.raises(PlanError, match="not committed yet"):
        finalize(str(dst))
    second = reshard(str(src), str(dst), CONFIG, rank=1, world_size=2)
    assert second.index_url is not None
    assert finalize(str(dst)) == second.index_url
    assert second.shards_written + first.shards_written == first.shards_total


def test_rerun_skips_committed_shards_and_cancel_keeps_them(tmp_path: Path) -> None:
    src, dst = write_local(tmp_path / "src", make_files()), tmp_path / "dst"
    cancel = threading.Event()

    def stop_after_first(event: ReshardEvent) -> None:
        if event.kind == "shard":
            cancel.set()

    partial = reshard(str(src), str(dst), CONFIG, progress=stop_after_first, cancel=cancel)
    assert partial.cancelled and 1 <= partial.shards_written < partial.shards_total
    assert not (dst / "shards.json").exists()
    rest = reshard(str(src), str(dst), CONFIG)
    assert rest.shards_skipped == partial.shards_written and rest.index_url
    reshard(str(src), str(tmp_path / "whole"), CONFIG)
    assert digests(local_shards(dst)) == digests(local_shards(tmp_path / "whole"))


def test_verify_catches_a_corrupted_shard(tmp_path: Path) -> None:
    src, dst = write_local(tmp_path / "src", make_files()), tmp_path / "dst"
    reshard(str(src), str(dst), CONFIG)
    victim = sorted(dst.glob("*.tar"))[1]
    data = bytearray(victim.read_bytes())
    data[1000] ^= 0xFF
    victim.write_bytes(bytes(data))
    report = verify(str(dst))
    assert not report.ok
    assert any(victim.name in p and "sha256" in p for p in report.problems)


def test_bad_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(PlanError, match="holds no objects"):
        reshard(str(tmp_path / "empty"), str(tmp_path / "d1"), CONFIG)
    assert not (tmp_path / "d1" / "_reshard").exists()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        reshard(str(tmp_path / "missing"), str(tmp_path / "d1"), CONFIG)
    src = write_local(tmp_path / "src", make_files(12))
    (tmp_path / "src" / "class_0" / "img_0000.cls").write_bytes(b"5")
    with pytest.raises(PlanError, match=r"duplicate sample member class_0/img_0000\.cls"):
        reshard(str(src), str(tmp_path / "d2"), CONFIG)
    assert not (tmp_path / "d2").exists()
    (tmp_path / "src" / "class_0" / "img_0000.cls").unlink()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(PlanError, match="not empty"):
        reshard(str(src), str(tmp_path / "busy"), CONFIG)
    with pytest.raises(PlanError, match="inside the source"):
        reshard(str(src), str(src / "out"), CONFIG)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        reshard(str(src), str(blocker / "dst"), CONFIG)


def test_a_destination_with_a_different_plan_is_refused(tmp_path: Path) -> None:
    src, dst = write_local(tmp_path / "src", make_files()), tmp_path / "dst"
    reshard(str(src), str(dst), CONFIG)
    before = digests(local_shards(dst))
    with pytest.raises(PlanError, match=r"different re-shard plan: seed 3 \(asked 4\)"):
        reshard(str(src), str(dst), ReshardConfig(shard_size=SHARD, seed=4))
    assert digests(local_shards(dst)) == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [("128MB", 128 * 10**6), ("64MiB", 64 * 2**20), ("1.5GB", 1_500_000_000), ("4096", 4096)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"shard_size": 100},
        {"labels": "folder"},
        {"seed": -1},
        {"shard_prefix": "a/b"},
        {"shard_size": 2**30, "max_memory_bytes": 2**30},
    ],
)
def test_config_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ReshardConfig(**kwargs)  # type: ignore[arg-type]


def test_s3_to_s3_with_awkward_keys_round_trips(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: object
) -> None:
    files = {
        "a b/x y.jpg": b"space" * 300,
        "üñí/çødé.jpg": b"unicode" * 300,
        "p+q/r+s.jpg": b"plus" * 300,
        "pct/100%.jpg": b"percent" * 300,
        "pct/100%.txt": b"caption",
        **make_files(20),
    }
    src = upload(s3_client, s3_bucket, "src/", files)
    dst = f"s3://{s3_bucket}/out/"
    result = reshard(src, dst, CONFIG, endpoint_url=s3_endpoint.url)
    assert result.index_url == f"{dst}shards.json"
    samples = samples_of(s3_shards(s3_client, s3_bucket, "out/"))
    for key, data in files.items():
        stem, ext = key.split(".", 1)
        assert samples[stem][ext] == data
    report = verify(dst, endpoint_url=s3_endpoint.url)
    assert report.ok, report.problems
    assert report.md5_checked == len(files)  # single-part uploads: ETag = MD5 of the source


def test_s3_destination_not_writable(s3_endpoint: S3Endpoint, tmp_path: Path) -> None:
    src = write_local(tmp_path / "src", make_files(6))
    with pytest.raises(FileNotFoundError):
        reshard(str(src), "s3://no-such-bucket-here/x/", CONFIG, endpoint_url=s3_endpoint.url)
    wrong = Credentials("nobody", "wrong-secret")
    with pytest.raises(PermissionError, match="not writable") as info:
        reshard(
            str(src), "s3://somebucket/x/", CONFIG, endpoint_url=s3_endpoint.url, credentials=wrong
        )
    assert "wrong-secret" not in str(info.value)


def test_multipart_shards_are_verified_by_etag(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: object, tmp_path: Path
) -> None:
    files = {f"big/{i}.bin": bytes([i]) * (3 * 2**20) for i in range(5)}
    src = write_local(tmp_path / "src", files)
    config = ReshardConfig(shard_size=12 * 2**20, multipart_bytes=5 * 2**20)
    result = reshard(str(src), f"s3://{s3_bucket}/mp/", config, endpoint_url=s3_endpoint.url)
    assert result.index_url and result.shards_total == 2
    shards = s3_shards(s3_client, s3_bucket, "mp/")
    assert max(len(d) for d in shards.values()) > 5 * 2**20  # at least one multipart upload
    assert verify(f"s3://{s3_bucket}/mp/", endpoint_url=s3_endpoint.url).ok


def test_tars_are_deterministic_and_readable_by_tarfile_and_the_native_reader() -> None:
    import io
    import tarfile

    from native_loader.tar import iter_samples
    from native_loader.tarwriter import FIXED_MODE, FIXED_MTIME, build_tar

    long = "d/" + "x" * 150
    members = [("a b/ünï.jpg", b"1" * 700), ("a b/ünï.json", b"{}"), (f"{long}.png", b"2")]
    first, second = build_tar(members), build_tar(list(members))
    assert first == second and len(first) % tarfile.RECORDSIZE == 0
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        infos = tar.getmembers()
        assert [i.name for i in infos] == [name for name, _ in members]
        assert {(i.mtime, i.mode, i.uid, i.gid, i.uname) for i in infos} == {
            (FIXED_MTIME, FIXED_MODE, 0, 0, "")
        }
    samples = list(iter_samples(first))
    assert [s["__key__"] for s in samples] == ["a b/ünï", long]
    assert samples[0]["jpg"] == b"1" * 700 and samples[1]["png"] == b"2"


def test_a_flat_folder_gets_no_labels(tmp_path: Path) -> None:
    files = {f"img_{i:03d}.jpg": bytes([i]) * 3000 for i in range(30)}
    src = write_local(tmp_path / "src", files)
    reshard(str(src), str(tmp_path / "dst"), CONFIG)
    samples = samples_of(local_shards(tmp_path / "dst"))
    assert len(samples) == 30 and all(set(s) == {"jpg"} for s in samples.values())
    assert not (tmp_path / "dst" / "classes.json").exists()

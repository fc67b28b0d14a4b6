"""The local cache: later epochs read from disk, the size cap holds, LRU order, no stale data."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from advisor.demo.server import S3Endpoint
from native_loader import ReaderConfig, S3IterableDataset, S3MapDataset, S3Reader
from native_loader.cache import LocalCache, read_through

N = 12
SIZE = 50_000


@pytest.fixture
def objects(s3_client, s3_bucket: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    data = {f"s3://{s3_bucket}/c/{i:03d}.bin": os.urandom(SIZE) for i in range(N)}
    for uri, body in data.items():
        s3_client.put_object(Bucket=s3_bucket, Key=uri.split("/", 3)[3], Body=body)
    return data


def _config(endpoint: S3Endpoint) -> ReaderConfig:
    return ReaderConfig(endpoint_url=endpoint.url)


def test_second_epoch_reads_from_disk(
    s3_endpoint: S3Endpoint, s3_bucket: str, objects: dict[str, bytes], tmp_path: Path
) -> None:
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/c/", config=_config(s3_endpoint), cache_dir=tmp_path,
        transform=lambda r: (r.uri, bytes(r)),
    )  # fmt: skip
    assert dict(dataset) == objects
    requests_after_first = dataset.reader.stats()["requests"]
    assert dict(dataset) == objects  # epoch 2: same bytes ...
    assert dataset.reader.stats()["requests"] == requests_after_first  # ... and no GET at all
    assert len(list(tmp_path.glob("*.obj"))) == N


@pytest.mark.parametrize("workers", [0, 2])
def test_workers_share_the_cache(
    s3_endpoint: S3Endpoint,
    s3_bucket: str,
    objects: dict[str, bytes],
    tmp_path: Path,
    workers: int,
) -> None:
    dataset = S3MapDataset(
        f"s3://{s3_bucket}/c/", config=_config(s3_endpoint), cache_dir=tmp_path, transform=bytes
    )
    for _ in range(2):
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=3, num_workers=workers, collate_fn=list,
            multiprocessing_context="fork" if workers else None,
        )  # fmt: skip
        got = [item for batch in loader for item in batch]
        assert sorted(got) == sorted(objects.values())
    assert len(list(tmp_path.glob("*.obj"))) == N
    assert not list(tmp_path.glob("*.tmp"))


def test_size_cap_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path, max_bytes=4 * 1000)
    for i in range(4):
        cache.put(f"u{i}", b"x" * 1000)
        time.sleep(0.01)  # distinct mtimes
    assert cache.get("u0") is not None  # u0 becomes the most recently used
    time.sleep(0.01)
    cache.put("u4", b"y" * 1000)
    assert cache.evict() <= 4 * 1000
    assert cache.get("u1") is None  # the least recently used went first
    assert cache.get("u0") is not None and cache.get("u4") is not None
    cache.put("huge", b"z" * 5000)  # larger than the cache: not stored
    assert cache.get("huge") is None


def test_a_hit_leaves_the_file_version_alone(tmp_path: Path) -> None:
    """A hit marks the file used by its access time: its size and mtime stand for its version
    while another process streams it, and a hit must not read there as a rewrite."""
    body = os.urandom(1 << 20)  # 16 parts of 64 KiB, read one part ahead
    cache = LocalCache(tmp_path, max_bytes=1 << 22)
    cache.put("s3://b/shard.tar", body)
    path = cache.path("s3://b/shard.tar", "")
    before = os.stat(path)
    time.sleep(0.02)
    config = ReaderConfig(part_size=1 << 16, read_ahead_bytes=1 << 16)
    with S3Reader(config) as reader, reader.open(str(path)) as stream:
        first = stream.read(1000)
        assert cache.get("s3://b/shard.tar") is not None  # another reader's hit meanwhile
        rest = stream.read()
    after = os.stat(path)
    assert first + rest == body
    assert after.st_mtime_ns == before.st_mtime_ns and after.st_atime_ns > before.st_atime_ns


def test_changed_object_is_not_served_stale(
    s3_endpoint: S3Endpoint,
    s3_client,
    s3_bucket: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="c/x.bin", Body=b"old")
    cache = LocalCache(tmp_path, max_bytes=10**6)
    with S3Reader(_config(s3_endpoint)) as reader:
        listed = list(reader.list(f"s3://{s3_bucket}/c/"))
        assert [bytes(r) for r in read_through(reader, listed, cache)] == [b"old"]
        s3_client.put_object(Bucket=s3_bucket, Key="c/x.bin", Body=b"new")
        relisted = list(reader.list(f"s3://{s3_bucket}/c/"))
        assert [bytes(r) for r in read_through(reader, relisted, cache)] == [b"new"]


def _zero_one_cached_file(cache_dir: Path) -> None:
    """What a crash after the rename, before the data reached the disk, leaves: a cached file of
    the right name and no bytes."""
    victim = sorted(cache_dir.glob("*.obj"))[0]
    victim.write_bytes(b"")


def test_a_short_cached_file_is_read_again(
    s3_endpoint: S3Endpoint, s3_bucket: str, objects: dict[str, bytes], tmp_path: Path
) -> None:
    """A cached file whose size is not the listed one is a miss, read from S3 again, and
    replaced: epoch 2 equals epoch 1 (it served the empty file before)."""
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/c/", config=_config(s3_endpoint), cache_dir=tmp_path,
        transform=lambda r: (r.uri, bytes(r)),
    )  # fmt: skip
    assert dict(dataset) == objects
    _zero_one_cached_file(tmp_path)
    assert dict(dataset) == objects
    assert sorted(p.stat().st_size for p in tmp_path.glob("*.obj")) == [SIZE] * N


def test_a_short_cached_file_loses_no_records(
    s3_endpoint: S3Endpoint,
    s3_client,
    s3_bucket: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """Records stream through the cache (`stream_through`): a zeroed cached shard is streamed
    from S3 again, so epoch 2 has every record (it lost that shard's records before)."""
    for i in range(3):
        body = "".join(f"shard{i} line{j}\n" for j in range(200)).encode()
        s3_client.put_object(Bucket=s3_bucket, Key=f"t/{i}.txt", Body=body)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/t/", config=_config(s3_endpoint), cache_dir=tmp_path, records="lines"
    )
    first = sorted(dataset)
    assert len(first) == 600
    _zero_one_cached_file(tmp_path)
    assert sorted(dataset) == first


def test_another_endpoint_is_another_cache(
    s3_endpoint: S3Endpoint,
    second_s3_endpoint: S3Endpoint,
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """The same bucket and key on two endpoints, read as bare URIs (no ETag to tell them
    apart) through one cache folder: each endpoint's bytes, never the other's."""
    uri = f"s3://{s3_bucket}/c/x.bin"
    other = second_s3_endpoint.boto3_client()
    other.create_bucket(Bucket=s3_bucket)
    try:
        s3_endpoint.boto3_client().put_object(Bucket=s3_bucket, Key="c/x.bin", Body=b"first")
        other.put_object(Bucket=s3_bucket, Key="c/x.bin", Body=b"second")
        for endpoint, expected in ((s3_endpoint, b"first"), (second_s3_endpoint, b"second")):
            dataset = S3MapDataset(
                [uri], config=_config(endpoint), cache_dir=tmp_path, transform=bytes
            )
            assert [dataset[0], dataset[0]] == [expected, expected]
    finally:
        other.delete_object(Bucket=s3_bucket, Key="c/x.bin")
        other.delete_bucket(Bucket=s3_bucket)


def test_bad_cap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LocalCache(tmp_path, 0)
    with pytest.raises(ValueError, match="cache_max_bytes"):
        S3IterableDataset(["s3://b/x"], cache_dir=tmp_path, cache_max_bytes=-1)

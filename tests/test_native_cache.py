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


def test_bad_cap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LocalCache(tmp_path, 0)
    with pytest.raises(ValueError, match="cache_max_bytes"):
        S3IterableDataset(["s3://b/x"], cache_dir=tmp_path, cache_max_bytes=-1)

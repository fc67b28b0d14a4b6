"""S3IterableDataset / S3MapDataset: each sample exactly once per epoch across ranks and workers."""

from __future__ import annotations

import collections
import io
import os
import tarfile
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from native_loader import (
    Credentials,
    ReaderConfig,
    ReadResult,
    S3IterableDataset,
    S3MapDataset,
)
from native_loader.tar import iter_members, iter_samples, split_name
from tests.native.conftest import forked_loader, tar_bytes


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_tar_members_match_tarfile(fmt: int) -> None:
    long_dir = "d" * 90 + "/" + "e" * 60 if fmt != tarfile.USTAR_FORMAT else "d" * 90
    samples = {
        f"{long_dir}/s{i:03d}": {"jpg": os.urandom(100 + i), "cls": str(i).encode()}
        for i in range(5)
    }
    samples["short"] = {"seg.png": b"", "json": b"{}"}
    data = tar_bytes(samples, fmt)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        expected = [
            (m.name, archive.extractfile(m).read())  # type: ignore[union-attr]
            for m in archive.getmembers()
        ]
    assert [(n, bytes(b)) for n, b in iter_members(data)] == expected
    got = list(iter_samples(data))
    assert [s["__key__"] for s in got] == list(samples)
    assert all({k: v for k, v in s.items() if k != "__key__"} == samples[s["__key__"]] for s in got)


def test_split_name() -> None:
    assert split_name("a/b.c.d") == ("a/b", "c.d")
    assert split_name("x.jpg") == ("x", "jpg")
    assert split_name("noext") == ("noext", "")


def test_truncated_tar_is_an_error() -> None:
    data = tar_bytes({"a": {"bin": os.urandom(2000)}})
    with pytest.raises(ValueError, match="truncated"):
        list(iter_members(data[:1000]))


def _setup(s3_endpoint: S3Endpoint) -> tuple[ReaderConfig, Credentials]:
    config = ReaderConfig(endpoint_url=s3_endpoint.url, region=s3_endpoint.region)
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    return config, credentials


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_tar_shards_every_sample_once_across_ranks(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, workers: int
) -> None:
    keys: list[str] = []
    for shard in range(7):
        samples = {
            f"shard{shard}/s{i:03d}": {"jpg": os.urandom(500), "cls": str(i).encode()}
            for i in range(6)
        }
        keys += list(samples)
        s3_client.put_object(
            Bucket=s3_bucket, Key=f"train/shard-{shard:03d}.tar", Body=tar_bytes(samples)
        )
    config, credentials = _setup(s3_endpoint)
    world = 2
    seen: list[str] = []
    for rank in range(world):
        dataset = S3IterableDataset(
            f"s3://{s3_bucket}/train/",
            config=config,
            credentials=credentials,
            tar_samples=True,
            shuffle=True,
            seed=3,
            rank=rank,
            world_size=world,
        )
        loader = forked_loader(dataset, 4, workers)
        for batch in loader:
            for sample in batch:
                assert set(sample) == {"__key__", "jpg", "cls"}
                seen.append(sample["__key__"])
    assert collections.Counter(seen) == collections.Counter(keys)


def test_objects_reshuffled_per_epoch(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    objects = {f"o/{i:03d}": os.urandom(10 + i) for i in range(40)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    config, credentials = _setup(s3_endpoint)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/o/",
        config=config,
        credentials=credentials,
        shuffle=True,
        shuffle_buffer=8,
        transform=bytes,
    )
    orders = []
    for epoch in range(2):
        dataset.set_epoch(epoch)
        items = list(dataset)
        assert sorted(items) == sorted(objects.values())
        orders.append(items)
    assert orders[0] != orders[1]
    dataset.set_epoch(0)
    assert list(dataset) == orders[0]  # the same epoch gives the same order


def test_map_dataset_with_workers(s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str) -> None:
    objects = {f"m/{i:02d}": os.urandom(100 + i) for i in range(12)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    config, credentials = _setup(s3_endpoint)
    dataset = S3MapDataset(f"s3://{s3_bucket}/m/", config=config, credentials=credentials)
    assert len(dataset) == 12
    first = dataset[0]
    assert isinstance(first, ReadResult) and bytes(first) == objects["m/00"]
    loader = forked_loader(dataset, 5, 2)
    got = [bytes(r) for batch in loader for r in batch]
    assert got == list(objects.values())


@pytest.fixture
def local_files(tmp_path: Any) -> list[str]:
    paths = []
    for i in range(23):
        path = tmp_path / f"f{i:02d}.bin"
        path.write_bytes(f"object {i}".encode())
        paths.append(str(path))
    return paths


def test_rank_and_world_size_from_torch_distributed(
    local_files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 3)
    dataset = S3IterableDataset(local_files, transform=bytes)
    assert dataset.shard() == (1, 3)
    assert list(dataset) == [f"object {i}".encode() for i in range(1, 23, 3)]
    explicit = S3IterableDataset(local_files, transform=bytes, rank=0, world_size=2)
    assert explicit.shard() == (0, 2)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_objects_once_per_epoch_across_ranks_and_workers(
    local_files: list[str], workers: int
) -> None:
    for epoch in range(2):
        seen: list[bytes] = []
        for rank in range(3):
            dataset = S3IterableDataset(
                f"{os.path.dirname(local_files[0])}/f",
                transform=bytes,
                shuffle=True,
                seed=11,
                rank=rank,
                world_size=3,
            )
            dataset.set_epoch(epoch)
            loader = forked_loader(dataset, 2, workers)
            seen += [item for batch in loader for item in batch]
        assert sorted(seen) == sorted(f"object {i}".encode() for i in range(23))


def test_dataset_argument_checks(local_files: list[str]) -> None:
    with pytest.raises(ValueError, match="rank and world_size"):
        S3IterableDataset(local_files, rank=0)
    with pytest.raises(ValueError, match="rank"):
        S3IterableDataset(local_files, rank=2, world_size=2)
    with pytest.raises(ValueError, match="shuffle_buffer"):
        S3IterableDataset(local_files, shuffle_buffer=-1)


@pytest.mark.parametrize("fmt", ["gnu", "pax", "ustar"])
def test_both_tar_readers_name_members_as_tarfile_does(fmt: str) -> None:
    """Whole-shard and streamed reading share one header reader: long names (GNU ``L``, pax
    ``path=``, the ustar prefix) and directories against Python's tarfile as the oracle."""
    import io
    import tarfile

    from native_loader.tar import iter_members, iter_members_stream

    formats = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT, "ustar": tarfile.USTAR_FORMAT}
    buffer = io.BytesIO()
    names = ["short.cls", "d" * 60 + "/" + "n" * 90 + ".jpg", "café/ünï.txt", "x/empty.bin"]
    with tarfile.open(fileobj=buffer, mode="w", format=formats[fmt]) as tar:
        folder = tarfile.TarInfo("a-folder")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for i, name in enumerate(names):
            data = bytes([i]) * (i * 700)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = buffer.getvalue()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        expected = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]  # type: ignore[union-attr]
    whole = [(n, bytes(b)) for n, b in iter_members(archive)]
    streamed = list(iter_members_stream(io.BytesIO(archive)))
    assert whole == streamed == expected

"""The compact index of a listed set (`native_loader.index`) and a dataset's listing
(`native_loader.listing`): bytes a key, shared by forked workers without copying, saved and
loaded instead of listing again, and streamed so that the first sample comes with the first
page."""

from __future__ import annotations

import collections
import gc
import hashlib
import json
import logging
import os
import pickle
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import Dataset

import native_loader.listing
import native_loader.reader
from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ObjectInfo, ReaderConfig, S3IterableDataset, S3MapDataset
from native_loader.index import IndexBuilder, ObjectIndex, load
from native_loader.settings import LoaderConfig, LoaderSettings
from tests.native.conftest import forked_loader

ROOT = Path(__file__).resolve().parents[2]

ENTRIES = 200_000


def _typical(count: int) -> list[ObjectInfo]:
    """Keys of typical length (``train/class_0123/img_00012345.jpg``), MD5 ETags, and a few
    multipart ETags and odd names."""
    infos = []
    for i in range(count):
        key = f"train/class_{i % 1000:04d}/img_{i:08d}.jpg"
        etag = f'"{hashlib.md5(key.encode()).hexdigest()}"' if i % 100 else f'"{i:x}-3"'
        infos.append(ObjectInfo(f"s3://bkt/{key}", key, 1000 + i % 5000, etag))
    infos.append(ObjectInfo("s3://bkt/é/ü ß.jpg", "é/ü ß.jpg", 0, ""))
    infos.append(ObjectInfo("s3://bkt/x/", "x/", 7, '"ABCDEF0123456789ABCDEF0123456789"'))
    return infos


def test_an_index_holds_typical_keys_in_at_most_100_bytes_each(tmp_path: Path) -> None:
    infos = _typical(ENTRIES)
    gc.collect()
    tracemalloc.start()
    try:
        index = IndexBuilder("s3://bkt/").extend(iter(infos)).build()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held / len(infos) <= 100, f"{held / len(infos):.1f} B a key"
    assert index.nbytes / len(infos) <= 100
    assert list(index) == infos
    index.save(tmp_path / "i.index", listed_at=1.0)
    loaded = load(tmp_path / "i.index")
    assert list(loaded) == infos and loaded.header["listed_at"] == 1.0
    assert list(pickle.loads(pickle.dumps(index))) == infos
    assert list(pickle.loads(pickle.dumps(loaded))) == infos
    (tmp_path / "cut.index").write_bytes((tmp_path / "i.index").read_bytes()[:-100])
    with pytest.raises(ValueError, match="whole listing index"):
        load(tmp_path / "cut.index")


class _Walk(Dataset[Any]):
    """One item: the growth of this worker's private memory while it makes every entry of the
    inherited `objects`, as a dataset reading them does."""

    def __init__(self, objects: Any) -> None:
        self.objects = objects

    def __len__(self) -> int:
        return 1

    def __getitem__(self, _: int) -> int:
        gc.freeze()  # as a loader's workers do (`FreezeInherited`): no collection walks them
        before = _private_bytes()
        total = 0
        for position in range(len(self.objects)):
            total += self.objects[position].size
        return _private_bytes() - before


def _private_bytes() -> int:
    with open("/proc/self/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f if line.startswith("Private_"))
    return sum(int(v.split()[0]) * 1024 for v in fields.values())


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="Linux's smaps")
def _walked_in_a_worker(objects: Any) -> int:
    """A forked worker's private-memory growth walking `objects`, frozen before the fork: a
    collection in this process while the worker runs (another thread's allocations start one)
    would walk the objects and copy their pages here, which leaves the worker's copies private
    before it reads them: 6 MiB "copied", not 19."""
    gc.collect()
    gc.freeze()
    try:
        return int(next(iter(forked_loader(_Walk(objects), 1, 1)))[0])
    finally:
        gc.unfreeze()


def test_forked_workers_read_the_index_without_copying_it() -> None:
    infos = _typical(ENTRIES)
    copied = _walked_in_a_worker(infos)
    index = IndexBuilder("s3://bkt/").extend(infos).build()
    del infos
    shared = _walked_in_a_worker(index)
    # the objects' reference counts copy their pages: about 19 MiB here (the oracle that this
    # measures at all); the index's buffers are only read
    assert copied > 10 * 2**20, copied
    assert shared < 2 * 2**20, (shared, copied)


def _setup(s3_endpoint: S3Endpoint) -> tuple[ReaderConfig, Credentials]:
    config = ReaderConfig(endpoint_url=s3_endpoint.url, region=s3_endpoint.region)
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    return config, credentials


def _put(s3_client: Any, bucket: str, prefix: str, count: int) -> dict[str, bytes]:
    objects = {f"{prefix}{i:04d}": f"object {i}".encode() for i in range(count)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=data)
    s3_client.put_object(Bucket=bucket, Key=f"{prefix}_SUCCESS", Body=b"")  # metadata
    s3_client.put_object(Bucket=bucket, Key=f"{prefix}dir/", Body=b"")  # a folder marker
    return objects


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing pages of 7 keys: a listing of a few dozen objects spans pages."""
    monkeypatch.setattr(native_loader.reader, "_LIST_PAGE", 7)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("shuffle", [False, True])
def test_each_object_once_across_two_ranks_of_two_workers(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None, shuffle: bool
) -> None:
    objects = _put(s3_client, s3_bucket, "e/", 61)
    config, credentials = _setup(s3_endpoint)
    for epoch in range(2):
        seen = []
        for rank in range(2):
            dataset = S3IterableDataset(
                f"s3://{s3_bucket}/e/", config=config, credentials=credentials, transform=bytes,
                shuffle=shuffle, seed=5, rank=rank, world_size=2,
            )  # fmt: skip
            dataset.set_epoch(epoch)
            listed = dataset.list_objects()  # shuffled: listed here, shared by the workers
            assert listed == (None if not shuffle else len(objects))
            seen += [item for batch in forked_loader(dataset, 3, 2) for item in batch]
        assert collections.Counter(seen) == collections.Counter(objects.values())


def test_a_shuffle_is_the_same_for_a_seed_and_epoch_listed_or_loaded(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    _put(s3_client, s3_bucket, "s/", 40)
    config, credentials = _setup(s3_endpoint)

    def order(epoch: int, seed: int = 1) -> list[bytes]:
        dataset = S3IterableDataset(
            f"s3://{s3_bucket}/s/", config=config, credentials=credentials, transform=bytes,
            shuffle=True, seed=seed, index_dir=tmp_path,
        )  # fmt: skip
        dataset.set_epoch(epoch)
        return list(dataset)

    first = order(0)
    assert order(0) == first  # the second from the saved index
    assert order(1) != first and sorted(order(1)) == sorted(first)
    assert order(0, seed=2) != first


def test_a_saved_index_is_loaded_instead_of_listing_and_refreshed_when_asked(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path, small_pages: None
) -> None:
    objects = _put(s3_client, s3_bucket, "m/", 30)
    config, credentials = _setup(s3_endpoint)
    source = f"s3://{s3_bucket}/m/"

    def mapped(**options: Any) -> S3MapDataset:
        return S3MapDataset(source, config=config, credentials=credentials, **options)

    first = mapped(cache_dir=tmp_path)
    assert first.listing is not None and first.listing.origin == "listed"
    pages = first.reader.stats()["requests"]  # its LIST requests: 7 keys a page
    assert pages >= 30 // 7
    second = mapped(cache_dir=tmp_path)
    assert second.listing is not None and second.listing.origin == "saved index"
    assert 0 <= second.listing.age_s < 60
    assert second.reader.stats()["requests"] == 0  # no LIST: no request at all
    assert [bytes(second[i]) for i in range(len(second))] == list(objects.values())
    s3_client.put_object(Bucket=s3_bucket, Key="m/new", Body=b"new")
    assert len(mapped(cache_dir=tmp_path)) == 30  # the saved index, as the listing was
    refreshed = mapped(cache_dir=tmp_path, refresh_index=True)
    assert len(refreshed) == 31 and refreshed.reader.stats()["requests"] >= pages
    s3_client.delete_object(Bucket=s3_bucket, Key="m/new")
    assert len(mapped(cache_dir=tmp_path, index_max_age_s=0)) == 30  # too old: listed again
    iterable = S3IterableDataset(
        source, config=config, credentials=credentials, index_dir=tmp_path, shuffle=True
    )
    assert iterable.list_objects() == 30 and iterable.listing is not None
    assert iterable.listing.origin == "saved index" and iterable.reader.stats()["requests"] == 0
    assert len(mapped()) == 30 and mapped().listing.origin == "listed"  # type: ignore[union-attr]


def test_an_unshuffled_read_yields_its_first_sample_before_the_listing_ends(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None
) -> None:
    objects = _put(s3_client, s3_bucket, "u/", 60)
    config, credentials = _setup(s3_endpoint)
    config = ReaderConfig(
        endpoint_url=config.endpoint_url, region=config.region, max_inflight_requests=2
    )
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/u/", config=config, credentials=credentials, transform=bytes
    )
    got = []
    for item in dataset:
        if not got:  # the listing's later pages are still to come: they hold this one
            assert dataset.listing is None
            s3_client.put_object(Bucket=s3_bucket, Key="u/zzz", Body=b"listed later")
        got.append(item)
    assert got == [*objects.values(), b"listed later"]
    assert dataset.listing is not None and dataset.listing.objects == 61
    assert list(dataset) == got  # the next epoch reads the listing kept


def test_a_shuffled_read_says_it_waits_for_the_listing(
    s3_endpoint: S3Endpoint,
    s3_client: Any,
    s3_bucket: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once, where the listing took long enough to notice: here, any time at all."""
    monkeypatch.setattr(native_loader.listing, "WAIT_SAID_AFTER_S", 0.0)
    _put(s3_client, s3_bucket, "w/", 5)
    config, credentials = _setup(s3_endpoint)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/w/", config=config, credentials=credentials, shuffle=True
    )
    with caplog.at_level(logging.WARNING, logger="native_loader"):
        assert dataset.list_objects() == 5
        list(dataset)
    said = [r.getMessage() for r in caplog.records if "waits for the whole listing" in r.message]
    assert len(said) == 1 and "5 objects listed in" in said[0] and "index_dir" in said[0]
    assert isinstance(dataset._objects, ObjectIndex)


def test_a_listing_that_asks_ahead_lists_the_same_keys_and_stops_when_left(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None
) -> None:
    _put(s3_client, s3_bucket, "a/", 30)
    config, credentials = _setup(s3_endpoint)
    source = f"s3://{s3_bucket}/a/"
    with native_loader.reader.S3Reader(config, credentials=credentials) as reader:
        assert list(reader.list(source, ahead=True)) == list(reader.list(source))
        assert list(reader.list(source, ahead=True, max_keys=9)) == list(reader.list(source))[:9]
        pages = reader.list(source, ahead=True)
        first = [next(pages) for _ in range(8)]  # into page 2: page 3 is asked for already
        pages.close()  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10  # the engine's thread ends a cancelled request
        while reader.stats()["open_tickets"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reader.stats()["open_tickets"] == 0  # the page asked ahead was cancelled
        assert first == list(reader.list(source))[:8]


# An exported module's make_dataloader in a process of its own: where its objects came from, the
# LIST requests of the training process (its workers only GET) and the samples of an epoch.
FROM_CONFIG = """
import json, sys
from native_loader.loader import from_config
loader = from_config(json.loads(sys.argv[1]), num_workers=2)
samples = sum(len(batch) for batch in loader)
listing = loader.dataset.listing
print(json.dumps({"origin": listing.origin, "path": listing.path, "samples": samples,
                  "requests": loader.dataset.reader.stats()["requests"]}))
"""


def test_an_exported_loader_lists_once_and_a_later_run_loads_the_listing(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """The exported loader (`from_config`, a CONFIG with no cache_dir) saves its listing in the
    home cache: a second run in a fresh process with the same HOME sends no LIST request and
    reads every object; with index_dir None, nothing is saved and every run lists."""
    _put(s3_client, s3_bucket, "x/", 30)
    config = LoaderConfig(
        uri=f"s3://{s3_bucket}/x/", endpoint_url=s3_endpoint.url, region=s3_endpoint.region,
        profile=None, tar_samples=False, data_format="binary", transform=None,
        loader=LoaderSettings(batch_size=4), shuffle=True, seed=0, data_source="stream",
        sagemaker_input_mode=None, shard_size_bytes=None, max_inflight_requests=8,
        max_inflight_bytes=64 * 2**20, cache_dir=None, cache_max_bytes=None,
    )  # fmt: skip
    home = tmp_path / "home"
    secret = s3_endpoint.credentials.secret_key
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}  # the session's AWS keys

    def run(data: dict[str, Any]) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", FROM_CONFIG, json.dumps(data)], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return result

    first, second = run(config.to_dict()), run(config.to_dict())
    assert first["requests"] >= 1 and first["samples"] == 30
    assert first["path"] is not None
    saved = Path(first["path"])
    assert saved.parent == home / ".cache" / "loader-advisor" / "listings" and saved.exists()
    assert secret.encode() not in saved.read_bytes()
    assert second == {"origin": "saved index", "path": str(saved), "samples": 30, "requests": 0}
    unsaved = run({**config.to_dict(), "index_dir": None})
    assert unsaved["origin"] == "listed" and unsaved["requests"] >= 1 and unsaved["path"] is None

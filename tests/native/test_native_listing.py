"""Listings that must not lose or repeat keys without a word (issue 57), and the keys people
really have read once with their bytes.

The listing faults come from `testing.FaultProxy` in front of SeaweedFS (a page cut short whose
length says it is whole, a page whose continuation token is gone, a connection closed mid-page);
what SeaweedFS cannot do (a key ending in ``/`` that has bytes, pages that overlap) comes from
the dict-backed fake in `tests.native.fake_s3`. Bytes are checked against what boto3 wrote, or
what the fake was given.
"""

from __future__ import annotations

import collections
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from native_loader import (
    Credentials,
    ReaderConfig,
    S3Error,
    S3IterableDataset,
    S3MapDataset,
    S3Reader,
)
from native_loader.local_copy import copy_to_local, local_copy_state
from testing import Faults, When
from tests.native.conftest import through_proxy
from tests.native.fake_s3 import fake_s3, fake_s3_config

PAGE = 10  # keys per listing page here: 25 objects are 3 pages
OBJECTS = 25


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("native_loader.reader._LIST_PAGE", PAGE)


def _put_many(client: Any, bucket: str, keys: list[str]) -> dict[str, bytes]:
    objects = {key: f"{key}|".encode() * 7 for key in keys}
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=objects[k]), keys))
    return objects


def _config(endpoint: S3Endpoint) -> tuple[ReaderConfig, Credentials]:
    config = ReaderConfig(endpoint_url=endpoint.url, region=endpoint.region)
    credentials = Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)
    return config, credentials


# -- a listing page that is not whole --------------------------------------------------------


@pytest.mark.parametrize(
    "faults",
    [
        Faults(short_body=When(requests=(2,)), short_at=0.6),
        Faults(short_body=When(requests=(3,)), short_at=0.8),
        Faults(drop_token=When(requests=(2,))),
        Faults(truncate=When(requests=(2,)), truncate_at=0.6),
        Faults(reset_mid_body=When(requests=(2,)), reset_at=0.6),
    ],
    ids=["short-page-2", "short-last-page", "no-token", "closed-mid-page", "reset-mid-page"],
)
def test_a_broken_listing_page_is_asked_again(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None, faults: Faults
) -> None:
    keys = [f"p/{i:04d}" for i in range(OBJECTS)]
    _put_many(s3_client, s3_bucket, keys)
    with through_proxy(s3_endpoint, faults) as (reader, proxy):
        listed = [info.key for info in reader.list(f"s3://{s3_bucket}/p/")]
        assert len(listed) == OBJECTS and listed == keys  # each once, none lost
        assert sum(proxy.stats().faults_injected.values()) == 1
        assert reader.stats()["retries"] == 1


def test_a_page_always_cut_short_fails_naming_the_page(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None
) -> None:
    _put_many(s3_client, s3_bucket, [f"p/{i:04d}" for i in range(OBJECTS)])
    faults = Faults(short_body=When(after_n=1), short_at=0.7)
    with through_proxy(s3_endpoint, faults) as (reader, _):
        listing = reader.list(f"s3://{s3_bucket}/p/")
        with pytest.raises(ConnectionError) as info:
            for _ in listing:
                pass
    message = str(info.value)
    assert "listing page 2 (asked 4 times) was cut short" in message
    assert "</ListBucketResult>" in message and "list again" in message
    assert f"s3://{s3_bucket}/p/" in message


def test_a_page_always_without_its_token_fails_naming_the_page(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None
) -> None:
    _put_many(s3_client, s3_bucket, [f"p/{i:04d}" for i in range(OBJECTS)])
    faults = Faults(drop_token=When(after_n=1))
    with through_proxy(s3_endpoint, faults) as (reader, _), pytest.raises(S3Error) as info:
        list(reader.list(f"s3://{s3_bucket}/p/"))
    assert info.value.code == "ProtocolError"
    message = str(info.value)
    assert f"s3://{s3_bucket}/p/: listing page 2 (asked 4 times) says it is truncated" in message
    assert "IsTruncated=true" in message and "NextContinuationToken" in message


def test_datasets_through_a_proxy_that_cuts_the_last_page(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None
) -> None:
    objects = _put_many(s3_client, s3_bucket, [f"p/{i:04d}" for i in range(OBJECTS)])
    _, credentials = _config(s3_endpoint)
    source = f"s3://{s3_bucket}/p/"
    faults = Faults(short_body=When(requests=(3,)), short_at=0.5)  # the 3rd GET: the last page
    with through_proxy(s3_endpoint, faults) as (reader, proxy):
        mapped = S3MapDataset(source, config=reader.config, credentials=credentials)
        assert proxy.stats().faults_injected == {"short_body": 1}
        assert sorted(bytes(mapped[i]) for i in range(len(mapped))) == sorted(objects.values())
    with through_proxy(s3_endpoint, faults) as (reader, proxy):
        streamed = S3IterableDataset(source, config=reader.config, credentials=credentials)
        assert sorted(bytes(r) for r in streamed) == sorted(objects.values())
        assert proxy.stats().faults_injected == {"short_body": 1}


# -- a prefix that changes while it is listed ------------------------------------------------


def test_objects_added_during_a_listing_are_listed_at_most_once(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_pages: None
) -> None:
    before = [f"p/{i:04d}" for i in range(0, 2 * OBJECTS, 2)]
    _put_many(s3_client, s3_bucket, before)
    added = [f"p/{i:04d}" for i in range(1, 2 * OBJECTS, 2)] + ["p/0000a", "p/9999"]
    config, credentials = _config(s3_endpoint)
    with S3Reader(config, credentials=credentials) as reader:
        listing = reader.list(f"s3://{s3_bucket}/p/")
        listed = [next(listing).key for _ in range(PAGE + 2)]  # into the second page
        _put_many(s3_client, s3_bucket, added)
        listed += [info.key for info in listing]
    repeated = [key for key, n in collections.Counter(listed).items() if n > 1]
    assert not repeated
    assert set(before) <= set(listed) <= set(before) | set(added)
    assert "p/9999" in listed  # added past the listing's position: listed


def test_pages_that_overlap_list_each_key_once() -> None:
    """A server whose next page starts at the last key sent (not after it): no key twice."""
    objects = {f"p/{i:03d}": os.urandom(10 + i) for i in range(OBJECTS)}
    with fake_s3("bkt", objects, overlap=True) as server:
        config, credentials = fake_s3_config(server)
        with S3Reader(config, credentials=credentials) as reader:
            listed = [info.key for info in reader.list("s3://bkt/p/", max_keys=None)]
            paged = [info.key for info in _paged(reader, "s3://bkt/p/")]
        mapped = S3MapDataset("s3://bkt/p/", config=config, credentials=credentials)
        got = sorted((r.uri, bytes(r)) for r in (mapped[i] for i in range(len(mapped))))
    assert listed == sorted(objects)
    assert paged == sorted(objects)
    assert got == sorted((f"s3://bkt/{k}", v) for k, v in objects.items())


def _paged(reader: S3Reader, uri: str) -> list[Any]:
    import native_loader.reader as reader_module

    page, reader_module._LIST_PAGE = reader_module._LIST_PAGE, 7
    try:
        return list(reader.list(uri))
    finally:
        reader_module._LIST_PAGE = page


# -- keys people really have -----------------------------------------------------------------

AWKWARD = [
    "a b",
    "two  spaces ",
    "a+b",
    "plus+",
    "a%b",
    "a%2Fb",
    "a%20b",
    "a#b",
    "a?b",
    "q=1&r=2",
    "Case",
    "case",
    "CASE",
    "é ü 日本",
    "a&b<c>'\"",
    "tilde~;,$@!*()",
]


def test_awkward_keys_are_read_once_with_their_bytes(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    written = {f"k/{name}": os.urandom(100 + i) for i, name in enumerate(AWKWARD)}
    for key, data in written.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    oracle = {  # boto3 reads back what it wrote, under the keys it lists
        o["Key"]: s3_client.get_object(Bucket=s3_bucket, Key=o["Key"])["Body"].read()
        for o in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="k/")["Contents"]
    }
    assert oracle == written
    expected = sorted((f"s3://{s3_bucket}/{k}", v) for k, v in oracle.items())
    config, credentials = _config(s3_endpoint)
    source = f"s3://{s3_bucket}/k/"
    streamed = S3IterableDataset(source, config=config, credentials=credentials)
    assert sorted((r.uri, bytes(r)) for r in streamed) == expected
    mapped = S3MapDataset(source, config=config, credentials=credentials)
    assert sorted((r.uri, bytes(r)) for r in (mapped[i] for i in range(len(mapped)))) == expected
    copy = copy_to_local(
        source, tmp_path / "copy", config=config, credentials=credentials, progress=None
    )
    local = S3IterableDataset(os.path.join(copy, ""), config=config)
    got = sorted(bytes(r) for r in local)
    assert got == sorted(oracle.values())


def test_a_key_ending_in_slash_with_bytes_is_an_object(tmp_path: Path) -> None:
    """Beside a folder of objects, `d/` with bytes is read once; `e/` with none is a folder
    marker and skipped, everywhere. (SeaweedFS cannot hold `d/` with bytes: the fake does.)"""
    objects = {
        "p/a": b"a" * 10,
        "p/d/": os.urandom(3000),
        "p/d/x": b"x" * 20,
        "p/e/": b"",
        "p/e/y": b"y" * 30,
        "p/empty": b"",
    }
    data_objects = {k: v for k, v in objects.items() if not (k.endswith("/") and not v)}
    expected = sorted((f"s3://bkt/{k}", v) for k, v in data_objects.items())
    with fake_s3("bkt", objects) as server:
        config, credentials = fake_s3_config(server)
        with S3Reader(config, credentials=credentials) as reader:
            assert bytes(reader.read("s3://bkt/p/d/")) == objects["p/d/"]
            with reader.open("s3://bkt/p/d/") as stream:
                assert stream.read() == objects["p/d/"]
            with pytest.raises(FileNotFoundError, match=r"ending in '/'.*list it"):
                reader.read("s3://bkt/p/")  # a prefix given where an object was meant
        streamed = S3IterableDataset("s3://bkt/p/", config=config, credentials=credentials)
        assert sorted((r.uri, bytes(r)) for r in streamed) == expected
        mapped = S3MapDataset("s3://bkt/p/", config=config, credentials=credentials)
        got = sorted((r.uri, bytes(r)) for r in (mapped[i] for i in range(len(mapped))))
        assert got == expected
        folder = tmp_path / "copy"
        copy_to_local("s3://bkt/p/", folder, config=config, credentials=credentials, progress=None)
        assert (
            local_copy_state("s3://bkt/p/", folder, config=config, credentials=credentials) is None
        )
    files = {
        str(path.relative_to(folder)): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file() and not path.name.startswith(("_", "."))
    }
    assert files == {
        "a": objects["p/a"],
        "d%2F": objects["p/d/"],
        "d/x": objects["p/d/x"],
        "e/y": objects["p/e/y"],
        "empty": b"",
    }
    local = S3IterableDataset(str(folder) + "/")
    assert sorted(bytes(r) for r in local) == sorted(data_objects.values())


def test_keys_a_local_copy_cannot_hold_apart_are_refused_before_copying(tmp_path: Path) -> None:
    objects = {"p/a": b"file", "p/a/b": b"below it", "p/c": b"c"}
    with fake_s3("bkt", objects) as server:
        config, credentials = fake_s3_config(server)
        with pytest.raises(ValueError, match="'p/a' and 'p/a/b'") as info:
            copy_to_local("s3://bkt/p/", tmp_path / "copy", config=config, credentials=credentials)
    assert "read the data in place" in str(info.value)
    assert not (tmp_path / "copy" / "c").exists()

"""S3Reader against a real S3 endpoint (SeaweedFS verifies signatures); boto3 is the oracle."""

from __future__ import annotations

import concurrent.futures
import os
import pickle
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ObjectInfo, ReaderConfig, S3Error, S3Reader

PART = 256 * 2**10  # a small part size so multi-part reads stay fast


def _config(endpoint: S3Endpoint, **overrides: Any) -> ReaderConfig:
    settings: dict[str, Any] = {
        "endpoint_url": endpoint.url,
        "region": endpoint.region,
        "part_size": PART,
        "max_inflight_bytes": 16 * PART,
        "max_inflight_requests": 8,
    }
    settings.update(overrides)
    return ReaderConfig(**settings)


def _credentials(endpoint: S3Endpoint) -> Credentials:
    return Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)


@pytest.fixture
def reader(s3_endpoint: S3Endpoint) -> Iterator[S3Reader]:
    with S3Reader(_config(s3_endpoint), credentials=_credentials(s3_endpoint)) as r:
        yield r


def _put_many(s3_client: Any, bucket: str, objects: dict[str, bytes]) -> None:
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda kv: s3_client.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]),
                objects.items(),
            )
        )


SIZES = [0, 1, 1000, PART - 1, PART, PART + 1, 3 * PART, 5 * 2**20 + 17]


@pytest.mark.parametrize("size", SIZES)
def test_read_equals_boto3(reader: S3Reader, s3_client: Any, s3_bucket: str, size: int) -> None:
    data = os.urandom(size)
    s3_client.put_object(Bucket=s3_bucket, Key="obj", Body=data)
    uri = f"s3://{s3_bucket}/obj"
    result = reader.read(uri)
    assert len(result) == size
    assert bytes(result) == data
    assert result.uri == uri
    assert result.attempts == 1
    assert 0 <= result.first_byte_s <= result.elapsed_s
    info = reader.stat(uri)
    assert info.size == size
    assert info.etag == s3_client.head_object(Bucket=s3_bucket, Key="obj")["ETag"]


def test_large_object_in_parallel_parts(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    data = os.urandom(24 * 2**20 + 3)
    s3_client.put_object(Bucket=s3_bucket, Key="big", Body=data)
    result = reader.read(f"s3://{s3_bucket}/big")
    assert bytes(result) == data
    stats = reader.stats()
    assert stats["peak_active_requests"] > 1
    assert stats["requests"] >= len(data) // PART


@pytest.mark.parametrize(
    ("offset", "length"),
    [(0, 0), (0, 1), (5, 100), (PART - 3, 10), (10, 3 * PART), (3 * PART, 10**9), (0, 10**9)],
)
def test_read_range_equals_boto3(
    reader: S3Reader, s3_client: Any, s3_bucket: str, offset: int, length: int
) -> None:
    data = os.urandom(3 * PART + 123)
    s3_client.put_object(Bucket=s3_bucket, Key="r", Body=data)
    result = reader.read_range(f"s3://{s3_bucket}/r", offset, length)
    assert bytes(result) == data[offset : offset + length]


def test_read_range_past_the_end(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="r", Body=b"abc")
    with pytest.raises(S3Error) as info:
        reader.read_range(f"s3://{s3_bucket}/r", 10, 5)
    assert info.value.status == 416
    assert info.value.code == "InvalidRange"


AWKWARD_KEYS = [
    "with space.txt",
    "plus+sign",
    "percent%25and%",
    "equals=sign&amp",
    "ünïcödé/日本語.bin",
    "dir/sub dir/file (1).jpg",
    "tilde~star*quote'",
    "semi;colon,comma:colon",
    "question?mark#hash",
    "control\x01char\ttab",  # not representable in XML 1.0: needs encoding-type=url
    "caret^pipe|{brace}[bracket]`",
    # Not here: "a//b", "./" or "../" segments and backslashes, which SeaweedFS (a file-system
    # backed store) normalises or rejects; the reader sends keys verbatim (CURLOPT_PATH_AS_IS).
    '<angle>&brackets"',
]


def test_awkward_keys_round_trip(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    objects = {key: key.encode() * 3 for key in AWKWARD_KEYS}
    _put_many(s3_client, s3_bucket, objects)
    try:
        listed = {info.key: info for info in reader.list(f"s3://{s3_bucket}/")}
        assert set(listed) == set(objects)
        for key, data in objects.items():
            assert listed[key].size == len(data)
            assert listed[key].uri == f"s3://{s3_bucket}/{key}"
            assert bytes(reader.read(listed[key].uri)) == data
        many = list(reader.read_many(f"s3://{s3_bucket}/{k}" for k in objects))
        assert [bytes(r) for r in many] == list(objects.values())
    finally:
        # The fixture's DeleteObjects sends keys in XML, which cannot carry control characters.
        for key in objects:
            if any(ord(c) < 32 for c in key):
                s3_client.delete_object(Bucket=s3_bucket, Key=key)


def test_list_paginates_past_1000(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    keys = [f"p/{i:05d}" for i in range(1105)]
    _put_many(s3_client, s3_bucket, {k: b"x" for k in keys})
    s3_client.put_object(Bucket=s3_bucket, Key="other", Body=b"y")
    listed = list(reader.list(f"s3://{s3_bucket}/p/"))
    assert [i.key for i in listed] == keys
    assert all(isinstance(i, ObjectInfo) and i.size == 1 for i in listed)
    assert [i.key for i in reader.list(f"s3://{s3_bucket}/p/", max_keys=1003)] == keys[:1003]
    boto_keys = [
        o["Key"]
        for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
        for o in page.get("Contents", [])
    ]
    assert [i.key for i in reader.list(f"s3://{s3_bucket}")] == boto_keys


def test_listed_sizes_too_large_to_read(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"abc")
    uri = f"s3://{s3_bucket}/k"
    with pytest.raises(ValueError, match="5 TiB"):  # no object is that large
        list(reader.read_many([ObjectInfo(uri, "k", 2**60, "")]))
    if Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1":
        pytest.skip("the kernel grants any allocation (vm.overcommit_memory=1)")
    with pytest.raises(MemoryError, match="cannot allocate"):  # a real size, not for this RAM
        list(reader.read_many([ObjectInfo(uri, "k", 2**40, "")]))
    assert bytes(reader.read(uri)) == b"abc"  # the reader still works


def test_list_with_delimiter(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    for key in ["a/1", "a/2", "b/c/3", "top"]:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"z")
    listed = list(reader.list(f"s3://{s3_bucket}/", delimiter="/"))
    assert [(i.key, i.size) for i in listed] == [("a/", 0), ("b/", 0), ("top", 1)]


def test_missing_key_and_bucket(reader: S3Reader, s3_bucket: str) -> None:
    with pytest.raises(FileNotFoundError) as info:
        reader.read(f"s3://{s3_bucket}/nope")
    assert info.value.filename == f"s3://{s3_bucket}/nope"
    assert "NoSuchKey" in str(info.value)
    with pytest.raises(FileNotFoundError):
        reader.stat(f"s3://{s3_bucket}/nope")
    with pytest.raises(FileNotFoundError, match="NoSuchBucket"):
        reader.read("s3://no-such-bucket-here/k")
    with pytest.raises(FileNotFoundError):
        list(reader.list("s3://no-such-bucket-here/"))


def test_wrong_secret_is_permission_error(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"data")
    secret = "definitely-the-wrong-secret"
    bad = Credentials(s3_endpoint.credentials.access_key, secret)
    with S3Reader(_config(s3_endpoint), credentials=bad) as reader:
        with pytest.raises(PermissionError, match="SignatureDoesNotMatch") as info:
            reader.read(f"s3://{s3_bucket}/k")
        assert secret not in str(info.value)
        assert "Signature=" not in str(info.value)
        clone = pickle.loads(pickle.dumps(info.value))
        assert type(clone) is PermissionError
        assert str(clone) == str(info.value)
        assert secret not in repr(reader)


def test_credentials_from_the_environment_chain(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    # conftest exports the endpoint's dummy credentials as AWS_ACCESS_KEY_ID / ..._SECRET_...
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"env")
    with S3Reader(ReaderConfig(endpoint_url=s3_endpoint.url)) as reader:
        assert bytes(reader.read(f"s3://{s3_bucket}/k")) == b"env"


def test_endpoint_from_environment(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint.url)
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"ep")
    with S3Reader() as reader:
        assert bytes(reader.read(f"s3://{s3_bucket}/k")) == b"ep"


@pytest.mark.timing
def test_unreachable_endpoint_is_connection_error(own_port: int) -> None:
    # Default retry policy (5 attempts, backoff 0.05 s doubling): all within the connect timeout.
    config = ReaderConfig(endpoint_url=f"http://127.0.0.1:{own_port}", connect_timeout_s=2.0)
    start = time.monotonic()
    with (
        S3Reader(config, credentials=Credentials("a", "b")) as reader,
        pytest.raises(ConnectionError) as info,
    ):
        reader.read("s3://bucket/key")
    assert time.monotonic() - start < config.connect_timeout_s
    assert "127.0.0.1" in str(info.value)
    assert "after 5 attempts" in str(info.value)
    assert type(pickle.loads(pickle.dumps(info.value))) is type(info.value)


def test_read_many_keeps_input_order(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    rng = random.Random(7)
    objects = {f"o/{i:03d}": os.urandom(rng.choice([0, 10, 5000, PART + 7])) for i in range(60)}
    _put_many(s3_client, s3_bucket, objects)
    order = list(objects)
    rng.shuffle(order)
    results = list(reader.read_many(f"s3://{s3_bucket}/{k}" for k in order))
    assert [r.uri for r in results] == [f"s3://{s3_bucket}/{k}" for k in order]
    assert [bytes(r) for r in results] == [objects[k] for k in order]
    unordered = list(reader.read_many((f"s3://{s3_bucket}/{k}" for k in order), ordered=False))
    assert sorted(r.uri for r in unordered) == sorted(f"s3://{s3_bucket}/{k}" for k in order)
    assert all(bytes(r) == objects[r.uri.split("/", 3)[3]] for r in unordered)


def test_read_many_bounds_inflight_with_a_slow_consumer(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    objects = {f"s/{i:03d}": os.urandom(20_000) for i in range(80)}
    _put_many(s3_client, s3_bucket, objects)
    config = _config(
        s3_endpoint, max_inflight_requests=4, max_inflight_bytes=6 * 2**16, part_size=2**16
    )
    with S3Reader(config, credentials=_credentials(s3_endpoint)) as reader:
        for i, result in enumerate(reader.read_many(f"s3://{s3_bucket}/{k}" for k in objects)):
            if i % 10 == 0:
                time.sleep(0.05)  # the consumer is slower than the network
            assert len(result) == 20_000
        stats = reader.stats()
    assert 1 <= stats["peak_active_requests"] <= 4
    assert stats["peak_inflight_bytes"] <= 6 * 2**16
    assert stats["inflight_bytes"] == 0
    assert stats["open_tickets"] == 0


def test_read_many_bounds_bytes_for_multipart_objects(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    objects = {f"m/{i}": os.urandom(5 * 2**16 + i) for i in range(8)}
    _put_many(s3_client, s3_bucket, objects)
    config = _config(
        s3_endpoint, max_inflight_requests=8, max_inflight_bytes=2 * 2**16, part_size=2**16
    )
    with S3Reader(config, credentials=_credentials(s3_endpoint)) as reader:
        got = [bytes(r) for r in reader.read_many(f"s3://{s3_bucket}/{k}" for k in objects)]
        stats = reader.stats()
    assert got == list(objects.values())
    # The oldest unfinished read may exceed the budget by at most its own size.
    assert stats["peak_inflight_bytes"] <= 2 * 2**16 + max(len(v) for v in objects.values())


def test_read_many_stops_when_the_consumer_stops(
    reader: S3Reader, s3_client: Any, s3_bucket: str
) -> None:
    _put_many(s3_client, s3_bucket, {f"c/{i}": os.urandom(PART * 2) for i in range(20)})
    stream = reader.read_many(f"s3://{s3_bucket}/c/{i}" for i in range(20))
    assert len(next(stream)) == PART * 2
    stream.close()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 2
    while reader.stats()["open_tickets"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader.stats()["open_tickets"] == 0
    assert reader.stats()["inflight_bytes"] == 0


def test_read_many_raises_the_first_failure(
    reader: S3Reader, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="ok", Body=b"1")
    uris = [f"s3://{s3_bucket}/ok", f"s3://{s3_bucket}/missing", f"s3://{s3_bucket}/ok"]
    stream = reader.read_many(uris)
    assert bytes(next(stream)) == b"1"
    with pytest.raises(FileNotFoundError):
        next(stream)


def test_memory_stays_bounded_over_thousands_of_reads(
    reader: S3Reader, s3_client: Any, s3_bucket: str
) -> None:
    keys = [f"small/{i}" for i in range(50)]
    _put_many(s3_client, s3_bucket, {k: os.urandom(4096) for k in keys})
    uris = [f"s3://{s3_bucket}/{k}" for k in keys]

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    for _ in reader.read_many(uris * 10):  # warm up allocators and connections
        pass
    before = rss()
    total = 0
    for result in reader.read_many(uris * 80):
        total += len(result)
    grown = rss() - before
    assert total == 4096 * 50 * 80
    assert grown < 40 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 4000 reads"
    assert reader.stats()["open_tickets"] == 0


def test_buffer_protocol_without_copies(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    values = np.arange(1000, dtype=np.float32)
    s3_client.put_object(Bucket=s3_bucket, Key="arr", Body=values.tobytes())
    result = reader.read(f"s3://{s3_bucket}/arr")
    view = memoryview(result)
    assert view.nbytes == values.nbytes
    array = np.frombuffer(result, dtype=np.float32)
    np.testing.assert_array_equal(array, values)
    tensor = torch.frombuffer(result, dtype=torch.float32)
    assert torch.equal(tensor, torch.from_numpy(values))
    # All three views share the reader's memory: a write through one shows in the others.
    array_w = np.frombuffer(result, dtype=np.float32)
    assert array_w.ctypes.data == tensor.data_ptr()
    del view, array, tensor, array_w
    clone = pickle.loads(pickle.dumps(result))
    assert bytes(clone) == values.tobytes() and clone.uri == result.uri


def test_threads_share_one_reader(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    objects = {f"t/{i}": os.urandom(PART + i) for i in range(16)}
    _put_many(s3_client, s3_bucket, objects)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda k: bytes(reader.read(f"s3://{s3_bucket}/{k}")), objects))
    assert got == list(objects.values())


def test_close_interrupts_a_blocked_read(reader: S3Reader, s3_bucket: str) -> None:
    closer = threading.Timer(0.3, reader.close)
    closer.start()
    try:
        # A listing of a missing bucket answers fast; use a read of a slow fake instead below.
        reader.close()
        with pytest.raises(ValueError, match="closed"):
            reader.read(f"s3://{s3_bucket}/k")
    finally:
        closer.cancel()


def test_static_keys_in_the_environment_sign_without_botocore(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    """The environment's keys (conftest's) settle the chain: the process reads without
    importing botocore, whose import is a first request's largest start-up cost."""
    import subprocess
    import sys

    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"signed")
    code = (
        "import sys\n"
        "from native_loader import ReaderConfig, S3Reader\n"
        f"reader = S3Reader(ReaderConfig(endpoint_url={s3_endpoint.url!r}))\n"
        f"assert bytes(reader.read('s3://{s3_bucket}/k')) == b'signed'\n"
        "print('botocore' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False"


def test_expiring_credentials_are_refreshed_before_use(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    import botocore.session
    from botocore.credentials import RefreshableCredentials

    good = s3_endpoint.credentials
    now = datetime.datetime.now(datetime.timezone.utc)
    refreshed: list[bool] = []

    def refresh() -> dict[str, Any]:
        refreshed.append(True)
        expiry = now + datetime.timedelta(hours=1)
        return {
            "access_key": good.access_key,
            "secret_key": good.secret_key,
            "token": None,
            "expiry_time": expiry.isoformat(),
        }

    # A set that expires in 2 minutes and whose secret is already wrong: only a refresh
    # before signing makes the read succeed.
    stale = RefreshableCredentials.create_from_metadata(
        {
            "access_key": good.access_key,
            "secret_key": "stale-secret",
            "token": None,
            "expiry_time": (now + datetime.timedelta(minutes=2)).isoformat(),
        },
        refresh_using=refresh,
        method="test",
    )
    monkeypatch.setattr(botocore.session.Session, "get_credentials", lambda self: stale)
    # no static keys in the environment: the chain (here, the patched botocore) answers
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"fresh")
    with S3Reader(ReaderConfig(endpoint_url=s3_endpoint.url)) as reader:
        assert bytes(reader.read(f"s3://{s3_bucket}/k")) == b"fresh"
    assert refreshed


def test_connections_are_kept_alive_and_reused(
    reader: S3Reader, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x" * 100)
    for _ in range(50):
        reader.read(f"s3://{s3_bucket}/k")
    list(reader.read_many([f"s3://{s3_bucket}/k"] * 200))
    stats = reader.stats()
    assert stats["requests"] == 250
    assert 1 <= stats["connections"] <= reader.config.max_inflight_requests


def test_read_many_with_listing_sizes(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    sizes = [0, 1, PART, PART + 1, 5 * PART + 3]
    objects = {f"h/{i}": os.urandom(n) for i, n in enumerate(sizes)}
    _put_many(s3_client, s3_bucket, objects)
    infos = list(reader.list(f"s3://{s3_bucket}/h/"))
    got = list(reader.read_many(infos))
    assert [bytes(r) for r in got] == list(objects.values())
    assert [r.uri for r in got] == [i.uri for i in infos]
    # Mixed with plain URIs, and unordered.
    mixed = [infos[4].uri, infos[3], infos[0].uri, infos[2]]
    assert sorted(bytes(r) for r in reader.read_many(mixed, ordered=False)) == sorted(
        objects[k] for k in ("h/4", "h/3", "h/0", "h/2")
    )


def test_object_changed_since_listing(reader: S3Reader, s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="c", Body=os.urandom(3 * PART))
    [info] = reader.list(f"s3://{s3_bucket}/c")
    s3_client.put_object(Bucket=s3_bucket, Key="c", Body=os.urandom(2 * PART))
    with pytest.raises(S3Error, match="object changed") as failure:
        list(reader.read_many([info]))
    assert failure.value.code == "ObjectChanged"  # as a stream says it (errors.object_changed)
    assert reader.stats()["open_tickets"] == 0

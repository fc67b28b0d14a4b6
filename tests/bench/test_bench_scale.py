"""The synthetic S3 endpoint of `python -m bench scale` answers as S3 does (every key listed once
by boto3's paginator and by the native reader, the right bytes for a Range), and the benchmark
runs end to end at a small scale."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_loader import Credentials, ReaderConfig, S3Reader
from testing.synthetic_answers import answer
from testing.synthetic_keyspace import Keyspace
from testing.synthetic_s3 import SyntheticS3

ROOT = Path(__file__).resolve().parents[2]
SPACE = Keyspace(count=5_000, size=1024)
EVERY_KEY = [SPACE.key(i) for i in range(SPACE.count)]


@pytest.fixture(scope="module")
def s3() -> Iterator[SyntheticS3]:
    with SyntheticS3(SPACE) as endpoint:
        yield endpoint


def _reader(s3: SyntheticS3) -> S3Reader:
    return S3Reader(ReaderConfig(endpoint_url=s3.url), credentials=Credentials("any", "any"))


@pytest.mark.parametrize("page_size", [1000, 333])
def test_boto3_paginator_lists_every_key_once(s3: SyntheticS3, page_size: int) -> None:
    client = s3.boto3_client()
    pages = list(
        client.get_paginator("list_objects_v2").paginate(
            Bucket="synth", Prefix="train/", PaginationConfig={"PageSize": page_size}
        )
    )
    keys = [item["Key"] for page in pages for item in page["Contents"]]
    assert keys == EVERY_KEY
    assert len(pages) == -(-SPACE.count // page_size)
    first = pages[0]["Contents"][0]
    assert first["Size"] == 1024 and first["ETag"] == SPACE.etag(SPACE.key(0))


def test_native_listing_gives_every_key_once_with_size_and_etag(s3: SyntheticS3) -> None:
    with _reader(s3) as reader:
        listed = list(reader.list(SPACE.uri))
    assert [info.key for info in listed] == EVERY_KEY
    assert {info.size for info in listed} == {1024}
    assert listed[4321].etag == SPACE.etag(SPACE.key(4321))


def test_listing_narrows_by_prefix_start_after_and_delimiter(s3: SyntheticS3) -> None:
    client = s3.boto3_client()
    narrowed = client.list_objects_v2(Bucket="synth", Prefix="train/0000012")
    assert [o["Key"] for o in narrowed["Contents"]] == EVERY_KEY[120:130]
    after = client.list_objects_v2(Bucket="synth", Prefix="train/", StartAfter=SPACE.key(4990))
    assert [o["Key"] for o in after["Contents"]] == EVERY_KEY[4991:]
    assert not after["IsTruncated"]
    top = client.list_objects_v2(Bucket="synth", Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["train/"] and "Contents" not in top
    assert client.list_objects_v2(Bucket="synth", Prefix="val/")["KeyCount"] == 0


def test_range_gets_give_the_bytes_of_the_computed_body(s3: SyntheticS3) -> None:
    key = SPACE.key(2024)
    body = SPACE.body(key)
    assert len(body) == 1024 and body.startswith(f"{key}\0\xff{key}\0\xff".encode("latin-1"))
    client = s3.boto3_client()
    assert client.get_object(Bucket="synth", Key=key)["Body"].read() == body
    ranges = {"bytes=100-199": body[100:200], "bytes=1000-": body[1000:],
              "bytes=-24": body[-24:], "bytes=1000-5000": body[1000:]}  # fmt: skip
    for wanted, expected in ranges.items():
        got = client.get_object(Bucket="synth", Key=key, Range=wanted)
        assert got["Body"].read() == expected, wanted
        assert got["ContentRange"].endswith("/1024")
    head = client.head_object(Bucket="synth", Key=key)
    assert head["ContentLength"] == 1024 and head["ETag"] == SPACE.etag(key)
    with _reader(s3) as reader:
        assert bytes(reader.read_range(f"s3://synth/{key}", 10, 30)) == body[10:40]
        assert bytes(reader.read(f"s3://synth/{SPACE.key(4999)}")) == SPACE.body(SPACE.key(4999))
        with pytest.raises(FileNotFoundError):  # past the last key: no such object
            reader.read(f"s3://synth/{SPACE.key(5000)}")


@pytest.mark.parametrize(
    ("query", "status"),
    [("list-type=2&max-keys=x", 400), ("list-type=2&continuation-token=-1", 400),
     ("list-type=2&continuation-token=5001", 400), ("", 501)],
)  # fmt: skip
def test_listing_refuses_arguments_it_cannot_honour(query: str, status: int) -> None:
    assert answer(SPACE, "GET", f"/synth?{query}", {}).status == status


def test_a_page_holds_at_most_1000_keys_and_its_token_resumes_after_it() -> None:
    page = answer(SPACE, "GET", "/synth?list-type=2&max-keys=5000", {}).body.decode()
    assert page.count("<Key>") == 1000 and "<NextContinuationToken>1000<" in page
    last = answer(SPACE, "GET", "/synth?list-type=2&continuation-token=4999", {}).body.decode()
    assert last.count("<Key>") == 1 and "<IsTruncated>false<" in last
    assert f"<Key>{SPACE.key(4999)}</Key>" in last


@pytest.mark.slow
def test_bench_scale_runs_end_to_end_at_a_small_scale(tmp_path: Path) -> None:
    """1,000 keys: the advice copies them to local disk (1 MiB) before the first batch."""
    out = tmp_path / "scale.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "scale", "--quick", "--keys", "1000", "--read-s", "1",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "a plain boto3 paginator lists every key" in done.stdout
    data = json.loads(out.read_text())
    assert data["keys"] == 1000 and data["recommend"]["config"]
    assert [r["keys"] for r in data["runs"]["boto3"] + data["runs"]["native"]] == [1000, 1000]
    loader = data["runs"]["loader"][0]
    assert loader["workers"] == 2 and loader["samples_read"] >= 256
    assert loader["rss_before"] > 0 and len(loader["worker_private_after_reading"]) == 2
    assert data["summary"]["first_batch_s"]["median"] > 0
    assert out.with_suffix(".md").read_text().startswith("`python -m bench scale --quick")

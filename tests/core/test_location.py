"""Data set locations: every malformed input is refused with a message that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.core.errors import describe, redact
from advisor.core.location import DatasetLocation, LocationError
from advisor.core.workload import Workload


@pytest.mark.parametrize(
    ("uri", "endpoint", "message"),
    [
        ("", None, "empty"),
        ("gs://bucket/x", None, "unsupported URI scheme 'gs'"),
        ("s3://", None, "no bucket"),
        ("s3://ab/x", None, "invalid bucket name"),
        ("s3://bad_bucket!/x", None, "invalid bucket name"),
        ("s3://bucket/x", "127.0.0.1:9000", "must start with http"),
        # a path would be dropped from every request: the listing answered NoSuchBucket
        (
            "s3://bucket/x",
            "http://127.0.0.1:9000/s3",
            r"has a path \('/s3'\).*http://127.0.0.1:9000$",
        ),
        ("s3://bucket/x", "http://:9000", "names no host"),
    ],
)
def test_bad_locations(uri: str, endpoint: str | None, message: str) -> None:
    with pytest.raises(LocationError, match=message):
        DatasetLocation(uri, endpoint_url=endpoint)


def test_an_endpoint_at_its_root_is_taken() -> None:
    for endpoint in ("http://127.0.0.1:9000", "http://127.0.0.1:9000/", "https://minio.example"):
        assert DatasetLocation("s3://bucket/x", endpoint_url=endpoint).endpoint_url == endpoint


def test_local_folder_must_exist(tmp_path: Path) -> None:
    assert DatasetLocation(str(tmp_path)).prefix_uri() == str(tmp_path.resolve())
    assert DatasetLocation(f"file://{tmp_path}").storage == "local"
    with pytest.raises(LocationError, match="does not exist"):
        DatasetLocation(str(tmp_path / "missing")).prefix_uri()


def test_s3_location() -> None:
    location = DatasetLocation(" s3://my-bucket/train/ ", endpoint_url="http://127.0.0.1:1")
    assert location.uri == "s3://my-bucket/train/"
    assert location.is_s3
    config = location.reader_config()
    assert config.endpoint_url == "http://127.0.0.1:1"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"consumer_rate": 0},
        {"consumer_rate": -3},
        {"consumer_rate": 1e12},
        {"batch_size": 0},
        {"epochs": 0},
        {"nodes": 0},
        {"gpus_per_node": 1000},
    ],
)
def test_absurd_workloads(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Workload(**kwargs)  # type: ignore[arg-type]


def test_step_time_gives_rate() -> None:
    workload = Workload.from_step_time(0.5, 64)
    assert workload.consumer_rate == 128
    with pytest.raises(ValueError, match="step_time_s"):
        Workload.from_step_time(0, 64)


def test_describe_and_redact() -> None:
    secret = "Credential=AKIAEXAMPLE/20260101/us-east-1/s3/aws4_request, Signature=deadbeef"
    assert "AKIA" not in redact(secret) and "deadbeef" not in redact(secret)
    assert describe(PermissionError("no access to bucket x")).startswith("access denied")
    assert describe(FileNotFoundError("bucket 'x' does not exist")).startswith("not found")
    assert describe(ConnectionError("refused")).startswith("cannot reach")
    assert describe(TimeoutError()).startswith("timed out")
    assert describe(ValueError("bad\nsecond line")) == "invalid input: bad"


def test_describe_drops_errno_and_repeats() -> None:
    assert (
        describe(FileNotFoundError(2, "NoSuchBucket: no bucket"))
        == "not found: NoSuchBucket: no bucket"
    )
    assert describe(ConnectionError("cannot reach the endpoint after 5 attempts")) == (
        "cannot reach the endpoint after 5 attempts"
    )

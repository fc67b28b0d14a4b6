"""Dataset profile over real listings: S3 through the native lister, and local folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.core.location import DatasetLocation
from advisor.demo.datasets import DemoSpec, upload, write_folder
from advisor.demo.server import S3Endpoint
from advisor.measure.profile import EmptyDatasetError, profile_dataset, size_stats
from advisor.report import profile_rows
from native_loader import Credentials, S3Reader

SPEC = DemoSpec(images=60, image_kb=(20, 40), classes=4, shard_mb=0.8, large_files=2, large_mb=1)


def _reader(endpoint: S3Endpoint, location: DatasetLocation) -> S3Reader:
    creds = endpoint.credentials
    return S3Reader(
        location.reader_config(), credentials=Credentials(creds.access_key, creds.secret_key)
    )


@pytest.fixture
def demo_bucket(s3_endpoint: S3Endpoint, s3_bucket: str) -> str:
    upload(s3_endpoint, s3_bucket, SPEC)
    return s3_bucket


def test_size_stats() -> None:
    stats = size_stats([1, 2, 3, 4, 100, 0, 7])
    assert (stats.min, stats.max, stats.p50) == (0, 100, 3)
    assert sum(count for _, count in stats.histogram) == 7
    assert dict(stats.histogram)[64] == 1


def test_profile_small_images(s3_endpoint: S3Endpoint, demo_bucket: str) -> None:
    location = DatasetLocation(f"s3://{demo_bucket}/small-images", endpoint_url=s3_endpoint.url)
    with _reader(s3_endpoint, location) as reader:
        profile = profile_dataset(location, reader)
    assert profile.object_count == 60 and not profile.sampled
    assert profile.dominant_format == "jpeg"
    assert profile.distinct_prefixes == 4  # class_00 .. class_03
    assert 20 * 1024 * 0.8 <= profile.sizes.p50 <= 40 * 1024 * 1.2


def test_profile_shards_counts_samples(s3_endpoint: S3Endpoint, demo_bucket: str) -> None:
    location = DatasetLocation(f"s3://{demo_bucket}/shards/", endpoint_url=s3_endpoint.url)
    with _reader(s3_endpoint, location) as reader:
        profile = profile_dataset(location, reader)
    tar = next(f for f in profile.formats if f.name == "tar")
    assert tar.samples_per_object is not None
    assert profile.samples_estimate == pytest.approx(60, rel=0.25)


def test_sampled_listing_is_marked_and_extrapolated(
    s3_endpoint: S3Endpoint, demo_bucket: str
) -> None:
    location = DatasetLocation(f"s3://{demo_bucket}/small-images/", endpoint_url=s3_endpoint.url)
    with _reader(s3_endpoint, location) as reader:
        profile = profile_dataset(location, reader, max_keys=40)
    assert profile.sampled and profile.listed_objects == 40
    assert "sampled" in profile.notes[0]
    assert 40 <= profile.object_count <= 90
    assert profile.count_basis == "extrapolated" and profile.objects_said == (
        f"about {profile.object_count:,} objects (extrapolated from the 40 listed before the "
        "listing was stopped: a sample)"
    )


def test_a_stopped_listing_says_the_size_as_a_lower_bound_with_its_basis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten objects in one folder, the listing stopped at 4: nothing to extrapolate over, so the
    profile, its rows and its JSON say "at least 4 objects" and why; listed whole, exact."""
    for i in range(10):
        (tmp_path / f"{i:02d}.bin").write_bytes(bytes(100 + i))
    location = DatasetLocation(str(tmp_path))
    with S3Reader(location.reader_config()) as reader:
        stopped = profile_dataset(location, reader, max_keys=4)
        whole = profile_dataset(location, reader)
    said = "at least 4 objects (the listing was stopped at 4: a sample)"
    assert (stopped.count_basis, stopped.objects_said) == ("lower bound", said)
    rows = dict(profile_rows(stopped))
    assert rows["objects"] == said
    assert rows["total size"].startswith("at least ") and rows["samples (estimate)"] == "at least 4"
    assert "stopped at 4 objects by its limit of 4 keys (--max-keys)" in rows["note"]
    assert whole.objects_said == "10 objects (all listed)" and whole.count_basis == "listed"
    assert dict(profile_rows(whole))["samples (estimate)"] == "10"
    assert main(["profile", str(tmp_path), "--max-keys", "4", "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)["profile"]
    assert (profile["count_basis"], profile["objects_said"]) == ("lower bound", said)


def test_empty_prefix_and_missing_bucket(s3_endpoint: S3Endpoint, demo_bucket: str) -> None:
    location = DatasetLocation(f"s3://{demo_bucket}/nothing-here/", endpoint_url=s3_endpoint.url)
    with _reader(s3_endpoint, location) as reader, pytest.raises(EmptyDatasetError):
        profile_dataset(location, reader)
    missing = DatasetLocation("s3://no-such-bucket-x/", endpoint_url=s3_endpoint.url)
    with _reader(s3_endpoint, missing) as reader, pytest.raises(FileNotFoundError):
        profile_dataset(missing, reader)


def test_profile_local_folder(tmp_path: Path) -> None:
    write_folder(tmp_path, SPEC)
    location = DatasetLocation(str(tmp_path / "large"))
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    assert profile.storage == "local" and profile.object_count == 2
    assert profile.dominant_format == "npy"


def test_profile_recognises_text_shards_as_records(tmp_path: Path) -> None:
    lines = tmp_path / "lines"
    lines.mkdir()
    for shard in range(3):
        text = "".join(f"document {shard} {i} " + "w" * 90 + "\n" for i in range(2000))
        (lines / f"part-{shard}.txt").write_text(text)
    jsonl = tmp_path / "jsonl"
    jsonl.mkdir()
    for shard in range(2):
        (jsonl / f"part-{shard}.ndjson").write_text('{"text": "abc"}\n' * 500)
    table = tmp_path / "table"
    table.mkdir()
    (table / "rows.csv").write_text("a,b\n" + "1,2\n" * 300)
    expected = {"lines": ("lines", 2000), "jsonl": ("jsonl", 500), "table": ("csv", 301)}
    for folder, (records, per_object) in expected.items():
        location = DatasetLocation(str(tmp_path / folder))
        with S3Reader(location.reader_config()) as reader:
            profile = profile_dataset(location, reader)
        (fmt,) = profile.formats
        assert profile.record_format == fmt.records == records
        assert fmt.samples_per_object == pytest.approx(per_object)
        assert fmt.bytes_per_record == pytest.approx(fmt.bytes / fmt.objects / per_object)


def test_label_files_are_not_record_shards(tmp_path: Path) -> None:
    write_folder(tmp_path, SPEC)
    location = DatasetLocation(str(tmp_path / "small-images"))
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    assert profile.record_format is None
    assert all(f.records is None for f in profile.formats)

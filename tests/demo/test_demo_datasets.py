"""Demo datasets: deterministic, the promised shapes, and the same samples in every layout."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from advisor.demo.datasets import (
    DEMO_DATA_VERSION,
    DemoCache,
    DemoSpec,
    default_cache_root,
    expected_bytes,
    iter_objects,
    upload,
    write_folder,
)

SMALL = DemoSpec(images=40, image_kb=(50, 200), shard_mb=1.0, large_files=2, large_mb=1.0)


def _digest(spec: DemoSpec) -> str:
    h = hashlib.sha256()
    for layout, obj in iter_objects(spec):
        h.update(layout.encode() + obj.key.encode() + obj.data)
    return h.hexdigest()


def test_same_spec_same_bytes_and_seed_changes_them() -> None:
    assert _digest(SMALL) == _digest(SMALL)
    assert _digest(SMALL) != _digest(DemoSpec(**{**SMALL.__dict__, "seed": 1}))


def test_layouts_have_the_promised_shapes() -> None:
    objects = list(iter_objects(SMALL))
    images = {o.key: o.data for layout, o in objects if layout == "small-images"}
    shards = [o for layout, o in objects if layout == "shards"]
    large = [o for layout, o in objects if layout == "large"]
    assert len(images) == 40
    for key, data in images.items():
        assert 50 * 1024 * 0.9 <= len(data) <= 200 * 1024 * 1.1, (key, len(data))
        assert Image.open(io.BytesIO(data)).format == "JPEG"
    # The shards hold exactly the same samples, WebDataset style, with labels matching prefixes.
    from_shards: dict[str, bytes] = {}
    labels: dict[str, int] = {}
    for shard in shards:
        assert len(shard.data) <= SMALL.shard_mb * 1e6 + 300 * 1024
        with tarfile.open(fileobj=io.BytesIO(shard.data)) as tar:
            for member in tar.getmembers():
                stem, ext = member.name.split(".")
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                if ext == "jpg":
                    from_shards[stem] = data
                else:
                    labels[stem] = int(data)
    assert len(shards) >= 2
    assert sorted(from_shards.values()) == sorted(images.values())
    for key, data in images.items():
        stem = key.rsplit("/", 1)[1].split(".")[0]
        assert from_shards[stem] == data
        assert key.split("/")[1] == f"class_{labels[stem]:02d}"
    assert len(large) == 2
    array = np.load(io.BytesIO(large[0].data))
    assert array.dtype == np.float32 and array.nbytes == 2**20


@pytest.mark.parametrize("field", ["images", "shard_mb", "large_mb", "classes"])
def test_absurd_sizes_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DemoSpec(**{field: -1})


def test_upload_fills_a_bucket(s3_endpoint, s3_client, s3_bucket: str) -> None:  # type: ignore[no-untyped-def]
    uris = upload(s3_endpoint, s3_bucket, SMALL)
    assert uris["shards"] == f"s3://{s3_bucket}/shards/"
    listed = {
        o["Key"]: o["Size"]
        for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
        for o in page.get("Contents", [])
    }
    expected = {o.key: len(o.data) for _, o in iter_objects(SMALL)}
    assert listed == expected


def test_write_folder(tmp_path: Path) -> None:
    paths = write_folder(tmp_path, SMALL)
    assert len(list(Path(paths["small-images"]).rglob("*.jpg"))) == 40
    assert len(list(Path(paths["large"]).glob("*.npy"))) == 2


def test_expected_bytes_match_what_is_generated() -> None:
    actual: dict[str, int] = {}
    for layout, obj in iter_objects(SMALL):
        actual[layout] = actual.get(layout, 0) + len(obj.data)
    for layout, expected in expected_bytes(SMALL).items():
        assert expected == pytest.approx(actual[layout], rel=0.25), layout


def test_only_the_layouts_asked_for_are_generated() -> None:
    only = {layout for layout, _ in iter_objects(SMALL, ("large",))}
    assert only == {"large"}
    images = [o.key for layout, o in iter_objects(SMALL, ("small-images",))]
    assert {layout for layout, _ in iter_objects(SMALL, ("small-images",))} == {"small-images"}
    assert images == [o.key for layout, o in iter_objects(SMALL) if layout == "small-images"]
    with pytest.raises(ValueError, match="unknown demo layout"):
        list(iter_objects(SMALL, ("huge",)))


def test_the_cache_keeps_generated_data_across_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = DemoCache(tmp_path, SMALL)
    assert cache.folder.name.startswith(f"v{DEMO_DATA_VERSION}-")  # the version stamp
    first = [(layout, o.key, o.data) for layout, o in cache.objects(("small-images",))]
    assert cache.has("small-images") and not cache.has("shards")
    assert not list(cache.folder.glob("*.partial-*"))  # written beside, then renamed
    # a second process reads the folder: nothing is generated again
    monkeypatch.setattr(
        "advisor.demo.datasets.iter_samples",
        lambda spec: pytest.fail("generated again although cached"),
    )
    again = DemoCache(tmp_path, SMALL)
    assert sorted(
        (layout, o.key, o.data) for layout, o in again.objects(("small-images",))
    ) == sorted(first)
    # another spec (or version) is another folder
    assert DemoCache(tmp_path, DemoSpec(images=3)).folder != cache.folder


def test_a_kept_file_changed_on_disk_is_generated_again(tmp_path: Path) -> None:
    """A kept JPEG zeroed in place (same size) is not served: the layout's recorded digests
    no longer match, so it is generated again, and the kept file is right once more."""
    layouts = ("small-images",)
    first = sorted((o.key, o.data) for _, o in DemoCache(tmp_path, SMALL).objects(layouts))
    cache = DemoCache(tmp_path, SMALL)
    folder = cache.folder / "small-images"
    victim = sorted(folder.rglob("*.jpg"))[0]
    victim.write_bytes(bytes(victim.stat().st_size))
    again = sorted((o.key, o.data) for _, o in cache.objects(layouts))
    assert again == first
    key = f"small-images/{victim.relative_to(folder).as_posix()}"
    assert victim.read_bytes() == dict(first)[key]
    assert cache.has("small-images")


def test_default_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", "/tmp/demo-cache")
    assert default_cache_root() == Path("/tmp/demo-cache")
    monkeypatch.delenv("LOADER_ADVISOR_DEMO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "/tmp/xdg")
    assert default_cache_root() == Path("/tmp/xdg/loader-advisor/demo")


def test_the_start_says_first_time_only_the_first_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wizard's status as the demo starts: "first time: generating data" only where no
    earlier start kept the layout's data (it said so on every start)."""
    from advisor.demo import ENV_URL, start_words, stop_demo
    from advisor.demo.datasets import COMPLETE, DemoCache

    monkeypatch.delenv(ENV_URL, raising=False)
    stop_demo()
    assert "first time: generating data" in start_words("small-images", tmp_path)
    layout = DemoCache(tmp_path, DemoSpec()).folder / "small-images"
    layout.mkdir(parents=True)
    (layout / COMPLETE).write_text("{}\n")
    said = start_words("small-images", tmp_path)
    assert "first time" not in said and "the data an earlier start kept" in said
    assert "first time: generating data" in start_words("shards", tmp_path)

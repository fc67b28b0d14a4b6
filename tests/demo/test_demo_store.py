"""The demo's kept store: a second start runs a real server on a copy of the first one's data
folder, and every object reads back byte for byte as the generator made it, on new ports,
without generating or uploading. A kept store that is missing, half-written or does not list
back what its stamp says is not used: the data is uploaded as before."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import advisor.demo
import advisor.demo.datasets as datasets
from advisor.demo import ENV_ACCESS_KEY, ENV_SECRET_KEY, ENV_URL, Demo
from advisor.demo.datasets import DEMO_BUCKET, DemoCache, DemoSpec, iter_objects
from advisor.demo.store import STAMP, StoreSnapshot
from bench.demo_start import cache_snapshot

pytestmark = [pytest.mark.s3, pytest.mark.timeout(180)]

SPEC = DemoSpec(images=40, image_kb=(4, 24), shard_mb=0.2, large_files=1, large_mb=0.5)


@pytest.fixture(autouse=True)
def _own_demo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No demo handed over through the environment; none left running after the test."""
    for name in (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY):
        monkeypatch.delenv(name, raising=False)
    advisor.demo.stop_demo()
    yield
    advisor.demo.stop_demo()


def _read_all(demo: Demo) -> dict[str, bytes]:
    client = demo.endpoint.boto3_client()
    keys = [
        obj["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=DEMO_BUCKET)
        for obj in page.get("Contents", [])
    ]
    return {key: client.get_object(Bucket=DEMO_BUCKET, Key=key)["Body"].read() for key in keys}


def _generated(layouts: Sequence[str]) -> dict[str, bytes]:
    return {obj.key: obj.data for _, obj in iter_objects(SPEC, layouts)}


def _forbid_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every generation and upload from now on."""
    work: list[str] = []
    original_samples, original_upload = datasets.iter_samples, advisor.demo.upload

    def samples(spec: DemoSpec) -> Iterator[tuple[int, int, bytes]]:
        work.append("generate")
        return original_samples(spec)

    def upload(*args: Any, **kwargs: Any) -> dict[str, str]:
        work.append("upload")
        return original_upload(*args, **kwargs)

    monkeypatch.setattr(datasets, "iter_samples", samples)
    monkeypatch.setattr(advisor.demo, "upload", upload)
    return work


def _first_start(cache: Path, layouts: Sequence[str] = ("small-images",)) -> Path:
    """Start, fill and stop a demo; the folder of the store it kept."""
    advisor.demo.ensure_demo(SPEC, layouts=layouts, cache=cache)
    advisor.demo.stop_demo()
    store = StoreSnapshot(DemoCache(cache, SPEC), layouts)
    assert store.stamp() is not None, "the first start kept no store"
    return store.folder


def test_a_second_start_reads_every_object_from_the_kept_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    store = _first_start(cache, ("small-images", "large"))
    kept = cache_snapshot(cache)
    work = _forbid_work(monkeypatch)

    demo = advisor.demo.ensure_demo(SPEC, layouts=("small-images", "large"), cache=cache)
    data_dir = advisor.demo._data_dir
    assert work == []  # neither generated nor uploaded
    assert data_dir is not None and not data_dir.is_relative_to(store)  # a copy, not the store
    assert sorted(demo.uris) == ["large", "small-images"]
    got = _read_all(demo)
    want = _generated(("small-images", "large"))
    assert sorted(got) == sorted(want)
    assert all(got[key] == want[key] for key in want)

    advisor.demo.stop_demo()
    assert not data_dir.exists()
    assert cache_snapshot(cache) == kept  # the server never wrote into the kept store


def test_a_layout_added_after_a_restore_leaves_every_object_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New uploads into a restored store (a new master on new ports) overwrite nothing."""
    cache = tmp_path / "cache"
    _first_start(cache)
    advisor.demo.ensure_demo(SPEC, layouts=("small-images",), cache=cache)
    demo = advisor.demo.ensure_demo(SPEC, layouts=("shards",), cache=cache)
    assert sorted(demo.uris) == ["shards", "small-images"]
    got = _read_all(demo)
    want = _generated(("small-images", "shards"))
    assert sorted(got) == sorted(want)
    assert all(got[key] == want[key] for key in want)


@pytest.mark.parametrize("damage", ["stamp says more", "no stamp", "other layouts"])
def test_a_store_that_does_not_match_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    cache = tmp_path / "cache"
    store = _first_start(cache)
    stamp = json.loads((store / STAMP).read_text())
    if damage == "stamp says more":
        stamp["summary"]["small-images"][0] += 1
        (store / STAMP).write_text(json.dumps(stamp))
    elif damage == "no stamp":  # as a half-written store would be
        (store / STAMP).unlink()
    else:
        stamp["layouts"] = ["large", "small-images"]
        (store / STAMP).write_text(json.dumps(stamp))
    work = _forbid_work(monkeypatch)

    demo = advisor.demo.ensure_demo(SPEC, layouts=("small-images",), cache=cache)
    assert work == ["upload"]  # from the cached files: uploaded, not generated
    got = _read_all(demo)
    want = _generated(("small-images",))
    assert sorted(got) == sorted(want)
    assert all(got[key] == want[key] for key in want)


def test_a_store_changed_on_disk_is_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept store whose volume was zeroed in part (its objects' sizes, and so the listing,
    unchanged) is not started on: its files' digests do not match the stamp's, so the data is
    uploaded again from the cached files, every object reads back right, and a whole store is
    kept in its place."""
    cache = tmp_path / "cache"
    store = _first_start(cache)
    volume = max((p for p in store.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    with open(volume, "r+b") as f:  # zero 64 KiB in the middle: JPEG bytes, as a bad disk would
        f.seek(volume.stat().st_size // 2)
        f.write(bytes(64 * 2**10))
    work = _forbid_work(monkeypatch)

    demo = advisor.demo.ensure_demo(SPEC, layouts=("small-images",), cache=cache)
    assert work == ["upload"]
    got = _read_all(demo)
    want = _generated(("small-images",))
    assert sorted(got) == sorted(want)
    assert all(got[key] == want[key] for key in want)
    advisor.demo.stop_demo()
    assert StoreSnapshot(DemoCache(cache, SPEC), ["small-images"]).stamp() is not None


def test_a_store_is_kept_per_set_of_layouts(tmp_path: Path) -> None:
    cache = DemoCache(tmp_path, SPEC)
    one, two = StoreSnapshot(cache, ["small-images"]), StoreSnapshot(cache, ["large", "shards"])
    assert one.folder != two.folder
    assert StoreSnapshot(cache, ["shards", "large"]).folder == two.folder
    assert one.stamp() is None and one.restore_into(tmp_path / "empty") is None


def test_a_store_that_did_not_match_is_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    store = _first_start(cache)
    stamp = json.loads((store / STAMP).read_text())
    stamp["summary"]["small-images"][1] += 1
    (store / STAMP).write_text(json.dumps(stamp))
    advisor.demo.ensure_demo(SPEC, layouts=("small-images",), cache=cache)
    advisor.demo.stop_demo()
    kept = StoreSnapshot(DemoCache(cache, SPEC), ["small-images"]).stamp()
    assert kept is not None and kept["small-images"][1] == stamp["summary"]["small-images"][1] - 1

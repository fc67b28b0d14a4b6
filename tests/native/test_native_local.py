"""The same S3Reader interface over local files (file:// URIs and plain paths)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from native_loader import ReaderConfig, S3Error, S3Reader
from native_loader.uri import is_metadata


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, bytes]:
    files = {
        "a.bin": os.urandom(1000),
        "empty": b"",
        "sub/b.bin": os.urandom(70_000),
        "sub/deeper/c d.txt": b"spaces in name",
        "sub2/x": b"x",
    }
    for name, data in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return {str(tmp_path / name): data for name, data in files.items()}


def test_list_recursive(tmp_path: Path, tree: dict[str, bytes]) -> None:
    with S3Reader() as reader:
        listed = list(reader.list(str(tmp_path)))
        assert sorted(i.uri for i in listed) == sorted(tree)
        assert {i.uri: i.size for i in listed} == {p: len(d) for p, d in tree.items()}
        assert list(reader.list(f"file://{tmp_path}/")) == listed
        assert len(list(reader.list(str(tmp_path), max_keys=2))) == 2


def test_list_with_delimiter_and_prefix(tmp_path: Path, tree: dict[str, bytes]) -> None:
    with S3Reader() as reader:
        top = [(i.key, i.size) for i in reader.list(f"{tmp_path}/", delimiter="/")]
        assert top == [
            (f"{tmp_path}/a.bin", 1000),
            (f"{tmp_path}/empty", 0),
            (f"{tmp_path}/sub/", 0),
            (f"{tmp_path}/sub2/", 0),
        ]
        prefixed = sorted(i.uri for i in reader.list(f"{tmp_path}/sub"))
        assert prefixed == sorted(p for p in tree if p.startswith(f"{tmp_path}/sub"))
        assert list(reader.list(f"{tmp_path}/missing/")) == []


def test_read_and_ranges(tree: dict[str, bytes]) -> None:
    with S3Reader() as reader:
        for path, data in tree.items():
            assert bytes(reader.read(path)) == data
            assert bytes(reader.read(f"file://{path.replace(' ', '%20')}")) == data
            assert bytes(reader.read_range(path, 3, 500)) == data[3:503]
            assert reader.stat(path).size == len(data)
        big = next(p for p in tree if p.endswith("b.bin"))
        assert bytes(reader.read_range(big, 69_990, 100)) == tree[big][69_990:]
        assert bytes(reader.read_range(big, 10**6, 5)) == b""
        array = np.frombuffer(reader.read(big), dtype=np.uint8)
        assert array.tobytes() == tree[big]


def test_read_many_mixed_order(tree: dict[str, bytes]) -> None:
    paths = list(tree) * 3
    with S3Reader() as reader:
        assert [bytes(r) for r in reader.read_many(paths)] == [tree[p] for p in paths]
        unordered = list(reader.read_many(paths, ordered=False))
        assert sorted(r.uri for r in unordered) == sorted(paths)


def test_missing_and_directory(tmp_path: Path) -> None:
    with S3Reader() as reader:
        with pytest.raises(FileNotFoundError):
            reader.read(str(tmp_path / "nope"))
        with pytest.raises(FileNotFoundError):
            reader.stat(str(tmp_path / "nope"))
        with pytest.raises(IsADirectoryError):
            reader.read(str(tmp_path))


@pytest.mark.parametrize(
    ("uri", "under", "hidden"),
    [
        ("s3://b/train/_SUCCESS", "s3://b/train/", True),
        ("s3://b/train/a/.DS_Store", "s3://b/train", True),
        ("s3://b/out/_reshard/done/0.json", "s3://b/out/", True),
        ("s3://b/train/cat/img_1.jpg", "s3://b/train/", False),
        ("s3://b/_data/a.jpg", "s3://b/_data/", False),  # the listed prefix itself is the user's
        ("s3://other/train/_x", "s3://b/train/", False),
        ("/home/u/.cache/set/a.jpg", "/home/u/.cache/set", False),
        ("/home/u/.cache/set/_tmp/a.jpg", "/home/u/.cache/set/", True),
    ],
)
def test_metadata_is_judged_below_the_listed_prefix(uri: str, under: str, hidden: bool) -> None:
    assert is_metadata(uri, under) is hidden


def test_datasets_skip_metadata_as_the_profile_does(tmp_path: Path) -> None:
    from native_loader import S3IterableDataset

    for name in ("a.bin", "sub/b.bin", "_SUCCESS", ".DS_Store", "sub/_tmp/c.bin"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    keys = sorted(os.path.relpath(uri, tmp_path) for uri in S3IterableDataset(str(tmp_path)).uris())
    assert keys == ["a.bin", os.path.join("sub", "b.bin")]


def test_the_read_ahead_threads_end_when_they_run_out_of_work(
    tree: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle read-ahead threads end by themselves, whether or not their reader is still open
    (a dataset's reader lives as long as whatever references it)."""
    import threading
    import time

    from native_loader import local_pool

    monkeypatch.setattr(local_pool, "_pool", local_pool.IdlePool(idle_s=0.3))

    def pool_threads() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("nl-local")]

    reader = S3Reader()  # left open on purpose
    assert len(list(reader.read_many(list(tree)))) == len(tree)
    assert pool_threads(), "local files are read ahead on the pool"
    deadline = time.monotonic() + 5
    while pool_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pool_threads(), "idle read-ahead threads outlived their work"
    assert len(list(reader.read_many(list(tree)))) == len(tree)  # threads start again on demand
    reader.close()


def test_a_file_name_that_is_not_utf8_is_refused_by_the_reader_itself(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9.bin")  # Latin-1 bytes: a surrogate escape once decoded
    (tmp_path / name).write_bytes(b"data")
    with S3Reader() as reader:
        listed = [o.uri for o in reader.list(f"{tmp_path}/")]
        for read in (reader.read, lambda u: list(reader.read_many([u])), reader.open):
            with pytest.raises(ValueError, match=r"caf\\xe9.bin failed: its file name is not"):
                read(listed[0])


@pytest.mark.parametrize("how", ["replaced", "rewritten in place"])
def test_a_file_changed_while_it_streams_is_refused(tmp_path: Path, how: str) -> None:
    """As an object overwritten mid-stream: a file replaced or rewritten (same size) between
    its parts raises ObjectChanged naming it, never old bytes then new ones."""
    path = tmp_path / "shard.bin"
    old, new = os.urandom(8 * 2**20), os.urandom(8 * 2**20)
    path.write_bytes(old)
    os.utime(path, ns=(10**18, 10**18))  # written long ago: a rewrite now has another mtime
    config = ReaderConfig(part_size=2**20, read_ahead_bytes=2 * 2**20)
    with S3Reader(config) as reader, reader.open(str(path)) as stream:
        assert stream.read(2**20) == old[: 2**20]
        if how == "replaced":
            (tmp_path / "new.bin").write_bytes(new)
            os.replace(tmp_path / "new.bin", path)
        else:
            with open(path, "r+b") as file:
                file.write(new)
        with pytest.raises(S3Error, match=f"{path}: the object changed") as info:
            stream.read()
        assert info.value.code == "ObjectChanged" and info.value.uri == str(path)

"""The local copy a copy-local loader reads is its listing's, never something else's (issue 40):
it follows the listing (new, changed, removed objects), is never shared between endpoints,
survives a crash's leftovers, and processes making it at once take turns."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.core.workload import Workload
from advisor.demo.server import S3Endpoint
from advisor.export import build_export
from native_loader import ReaderConfig
from native_loader.local_copy import LOCK, copy_to_local, last_copy, local_copy_state
from tests.export_helpers import advised_session, exported_command, run_exported

READ_EPOCH = (
    "import {stem}\n"
    "name = lambda data: bytes(data).split(b'|')[0].decode()  # the object's own name\n"
    "loader = {stem}.make_dataloader(num_workers=0, transform=name{extra})\n"
    "names = sorted(s for b in loader for s in b)\n"
    "print(len(names), *names)\n"
)


def _put(client, bucket: str, tag: str, keys: range) -> set[str]:  # type: ignore[no-untyped-def]
    """Objects data/NNN.bin whose bytes say which endpoint (`tag`) and key they are."""
    names = set()
    for i in keys:
        name = f"{tag}/{i:03d}"
        client.put_object(Bucket=bucket, Key=f"data/{i:03d}.bin", Body=f"{name}|".encode() * 300)
        names.add(name)
    return names


def _export(endpoint: S3Endpoint, bucket: str, folder: Path, stem: str) -> None:
    """A copy-local export of s3://bucket/data/ on `endpoint`, saved as `folder/stem.py`."""
    session = advised_session(
        f"s3://{bucket}/data/", Workload(batch_size=8, epochs=2), endpoint_url=endpoint.url
    )
    assert session.recommendation is not None and session.location is not None
    copy_local = dataclasses.replace(
        session.recommendation, data_source="copy-local", cache_locally=False
    )
    bundle = build_export(session.location, copy_local, session.workload, session.profile)
    assert bundle.config.local_copy_dir is not None
    bundle.save(folder, stem)


def _epoch(folder: Path, stem: str, home: Path, extra: str = "") -> set[str]:
    code = READ_EPOCH.format(stem=stem, extra=extra)
    result = run_exported(folder / f"{stem}.py", code=code, home=home)
    assert result.returncode == 0, result.stderr
    count, *names = result.stdout.split()
    assert int(count) == len(names) == len(set(names))
    return set(names)


@pytest.fixture
def same_bucket_elsewhere(second_s3_endpoint: S3Endpoint, s3_bucket: str) -> Iterator[object]:
    """The test's bucket name, created on the second endpoint too; emptied and deleted after."""
    client = second_s3_endpoint.boto3_client()
    client.create_bucket(Bucket=s3_bucket)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=s3_bucket, Key=obj["Key"])
    client.delete_bucket(Bucket=s3_bucket)


def test_an_exported_copy_follows_its_listing_and_its_endpoint(
    s3_endpoint: S3Endpoint,
    second_s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    same_bucket_elsewhere,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """Export 40 objects and read an epoch: 40. Add 60 and read again: 100 (the old copy's 40
    were read before). The same bucket and prefix on another endpoint, holding 25 other objects,
    exported: 25 of its own (the first endpoint's copy was read before). Every run shares one
    HOME, so every export's default copy folder is under the same ~/.cache/loader-advisor."""
    home, first, second = tmp_path / "home", tmp_path / "first", tmp_path / "second"
    names = _put(s3_client, s3_bucket, "a", range(40))
    _export(s3_endpoint, s3_bucket, first, "copy_a")
    assert _epoch(first, "copy_a", home) == names
    names |= _put(s3_client, s3_bucket, "a", range(40, 100))
    assert _epoch(first, "copy_a", home) == names
    others = _put(same_bucket_elsewhere, s3_bucket, "b", range(200, 225))
    _export(second_s3_endpoint, s3_bucket, second, "copy_b")
    assert _epoch(second, "copy_b", home) == others
    assert _epoch(first, "copy_a", home) == names  # and the first copy is still the first's
    # the first export pointed at the second endpoint reads it in place, not the first's copy
    moved = f", endpoint_url={second_s3_endpoint.url!r}"
    assert _epoch(first, "copy_a", home, moved) == others


def test_a_refresh_fetches_changed_and_deletes_removed_objects(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """Changed objects (same size, new ETag) are fetched, removed ones deleted, the rest kept;
    the state names what is stale, then nothing."""
    uri, config = f"s3://{s3_bucket}/data/", ReaderConfig(endpoint_url=s3_endpoint.url)
    _put(s3_client, s3_bucket, "a", range(10))
    copy_to_local(uri, tmp_path, config=config, progress=None)
    assert local_copy_state(uri, tmp_path, config=config) is None  # its record is no data
    size = len("a/000|") * 300
    first = last_copy(tmp_path)  # each sync records what it fetched and its time
    assert first is not None and (first.objects, first.bytes) == (10, 10 * size)
    assert (first.copied_objects, first.copied_bytes) == (10, 10 * size)
    assert first.seconds > 0 and first.bytes_per_s == 10 * size / first.seconds
    copy_to_local(uri, tmp_path, config=config, progress=None)  # up to date: fetches nothing...
    assert last_copy(tmp_path) == first  # ...and keeps the record of the sync that made it
    _put(s3_client, s3_bucket, "x", range(3))  # same sizes, other bytes
    for i in range(8, 10):
        s3_client.delete_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin")
    state = local_copy_state(uri, tmp_path, config=config)
    assert state == "is stale: 3 changed objects, 2 objects removed at the source"
    lines: list[str] = []
    copy_to_local(uri, tmp_path, config=config, progress=lines.append)
    assert lines[0].startswith("copying 3 of 8 objects")
    assert all("MiB" in line and " MB" not in line for line in lines), lines  # one unit system
    assert local_copy_state(uri, tmp_path, config=config) is None
    refresh = last_copy(tmp_path)
    assert refresh is not None and (refresh.objects, refresh.copied_objects) == (8, 3)
    assert refresh.copied_bytes == 3 * size and refresh.finished >= first.finished
    on_disk = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name[0] not in "_."}
    in_s3 = {
        f"{i:03d}.bin": s3_client.get_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin")[
            "Body"
        ].read()
        for i in range(8)
    }
    assert on_disk == in_s3


def test_a_crash_leftover_is_fetched_again(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """A file left zero-length (a crash after its rename) and an earlier version's `.part` are
    not the listing's: the state says so, and the next copy fetches the file again."""
    uri, config = f"s3://{s3_bucket}/data/", ReaderConfig(endpoint_url=s3_endpoint.url)
    _put(s3_client, s3_bucket, "a", range(5))
    copy_to_local(uri, tmp_path, config=config, progress=None)
    (tmp_path / "002.bin").write_bytes(b"")
    (tmp_path / "003.bin.part").write_bytes(b"half")
    state = local_copy_state(uri, tmp_path, config=config)
    assert state == ("is stale: 1 files of another size than listed, 1 files not in the listing")
    copy_to_local(uri, tmp_path, config=config, progress=None)
    assert (tmp_path / "002.bin").stat().st_size == len("a/002|") * 300
    assert not (tmp_path / "003.bin.part").exists()
    assert local_copy_state(uri, tmp_path, config=config) is None


def test_a_folder_of_something_else_is_refused(
    s3_endpoint: S3Endpoint,
    second_s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    same_bucket_elsewhere,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """The copy of one endpoint's prefix is never read or overwritten as another's, and a
    folder holding files the copy did not write is not filled (or emptied)."""
    uri = f"s3://{s3_bucket}/data/"
    _put(s3_client, s3_bucket, "a", range(3))
    _put(same_bucket_elsewhere, s3_bucket, "b", range(3))
    first = ReaderConfig(endpoint_url=s3_endpoint.url)
    copy_to_local(uri, tmp_path / "copy", config=first, progress=None)
    other = ReaderConfig(endpoint_url=second_s3_endpoint.url)
    for attempt in (local_copy_state, copy_to_local):
        with pytest.raises(ValueError, match=r"holds the local copy of .* on http.*, not of"):
            attempt(uri, tmp_path / "copy", config=other)  # type: ignore[operator]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    with pytest.raises(ValueError, match=r"1 files that are not from .*thesis\.tex"):
        copy_to_local(uri, tmp_path / "mine", config=first, progress=None)
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"


def test_three_processes_copy_once_and_all_read(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """Three processes on one node run the same copy-local export at once (no ranks): one
    copies, the others wait for it and then read the whole set (two died on a `.part` file
    another had renamed before)."""
    names = _put(s3_client, s3_bucket, "a", range(40))
    _export(s3_endpoint, s3_bucket, tmp_path, "shared_cfg")
    code = "import shared_cfg\nshared_cfg.prepare()\n" + READ_EPOCH.format(
        stem="shared_cfg", extra=""
    )
    command, env = exported_command(tmp_path / "shared_cfg.py", code=code, home=tmp_path / "home")
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    runs = [subprocess.Popen(command, cwd=tmp_path, env=env, text=True, **pipes) for _ in range(3)]
    outputs = [run.communicate(timeout=180) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
        assert set(out.split()[1:]) == names
    copied = [err.count("copying 40 of 40 objects") for _, err in outputs]
    assert sorted(copied) == [0, 0, 1]


def test_a_stuck_copier_is_waited_for_a_bounded_time(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """A process that holds the copy's lock and makes no progress: a second prepare gives up
    after `wait_s`, naming it, instead of hanging."""
    _put(s3_client, s3_bucket, "a", range(2))
    with open(tmp_path / LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("4242\n")
        lock.flush()
        with pytest.raises(TimeoutError, match=r"process 4242 holds the lock .* no object"):
            copy_to_local(
                f"s3://{s3_bucket}/data/", tmp_path, progress=None, wait_s=0.5,
                config=ReaderConfig(endpoint_url=s3_endpoint.url),
            )  # fmt: skip


def test_a_copy_made_by_an_earlier_version_is_checked_and_kept(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """A copy from before copies recorded their source (a manifest, no `_source.json`) is not
    read unchecked: its state says so, and the next prepare adopts it, keeping every object
    that matches the listing."""
    uri, config = f"s3://{s3_bucket}/data/", ReaderConfig(endpoint_url=s3_endpoint.url)
    _put(s3_client, s3_bucket, "a", range(5))
    copy_to_local(uri, tmp_path, config=config, progress=None)
    (tmp_path / "_source.json").unlink()
    state = local_copy_state(uri, tmp_path, config=config)
    assert state == "was made by an earlier version, which did not record its source"
    lines: list[str] = []
    copy_to_local(uri, tmp_path, config=config, progress=lines.append)
    assert lines[0].startswith("copying 0 of 5 objects")
    assert local_copy_state(uri, tmp_path, config=config) is None


def test_the_same_data_on_another_endpoint_shares_its_copy(
    s3_endpoint: S3Endpoint,
    second_s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    same_bucket_elsewhere,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """The demo on a new kernel's port (issue 55): the same bucket, prefix and objects (keys,
    sizes, ETags) on another endpoint. The copy is that endpoint's too: checked, recorded as
    its, nothing fetched again. Once the data differs it is another's copy again: refused."""
    uri = f"s3://{s3_bucket}/data/"
    _put(s3_client, s3_bucket, "a", range(5))
    _put(same_bucket_elsewhere, s3_bucket, "a", range(5))
    first = ReaderConfig(endpoint_url=s3_endpoint.url)
    other = ReaderConfig(endpoint_url=second_s3_endpoint.url)
    copy_to_local(uri, tmp_path, config=first, progress=None)
    made = last_copy(tmp_path)
    state = local_copy_state(uri, tmp_path, config=other)
    assert state == "was made from another endpoint serving the same data (to record as this one)"
    lines: list[str] = []
    copy_to_local(uri, tmp_path, config=other, progress=lines.append)
    assert lines == [f"copying 0 of 5 objects ({5 * len('a/000|') * 300 / 2**20:,.1f} MiB in all)"]
    assert last_copy(tmp_path) == made  # the record of the sync that fetched it stands
    assert local_copy_state(uri, tmp_path, config=other) is None
    source = json.loads((tmp_path / "_source.json").read_text())
    assert source["endpoint"] == second_s3_endpoint.url
    _put(s3_client, s3_bucket, "x", range(1))  # the first endpoint's data changes
    for attempt in (local_copy_state, copy_to_local):
        with pytest.raises(ValueError, match=r"holds the local copy of .* on http.*, not of"):
            attempt(uri, tmp_path, config=first)  # type: ignore[operator]


def test_the_copys_progress_gives_a_share_that_agrees(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    """Each progress line gives the share of the bytes it names ("copied 1.0 of 4.0 MiB
    (25%)"): a caller's own fraction had printed "copied 121.5 of 241.2 MiB (0%)"."""
    for i in range(4):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i}.bin", Body=bytes(2**20))
    lines: list[str] = []
    copy_to_local(
        f"s3://{s3_bucket}/data/", tmp_path, config=ReaderConfig(endpoint_url=s3_endpoint.url),
        progress=lines.append,
    )  # fmt: skip
    said = re.compile(r"copied ([\d.]+) of ([\d.]+) MiB \((\d+)%\)")
    copied = [said.fullmatch(line) for line in lines[1:]]
    assert copied and all(copied), lines
    shares = [(float(m[1]), float(m[2]), int(m[3])) for m in copied if m]
    assert all(round(100 * done / total) == share for done, total, share in shares), lines
    assert shares[-1] == (4.0, 4.0, 100)

"""A full disk during the local copy (`native_loader.local_copy`, what an exported module's
`prepare()` runs), on a small tmpfs mounted for the test: the error names the folder, the space
free and the space needed; nothing half-copied is taken for complete; a later copy with space
completes, every byte right."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ReaderConfig
from native_loader.local_copy import COMPLETE, MANIFEST, copy_to_local, local_copy_state

OBJECT = 256 * 2**10


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs at tmp_path/disk, unmounted after (`remount(size)` grows it)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"a full disk is played by a small tmpfs, which needs root: {mounted.stderr}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def remount(disk: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(disk)], check=True)


def put(client: Any, bucket: str, count: int) -> dict[str, bytes]:
    objects = {f"data/{i:03d}.bin": os.urandom(OBJECT) for i in range(count)}
    for key, data in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    return objects


def copy(endpoint: S3Endpoint, bucket: str, folder: Path, **options: Any) -> str:
    config = ReaderConfig(endpoint_url=endpoint.url, region=endpoint.region)
    credentials = Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)
    return copy_to_local(
        f"s3://{bucket}/data/", folder, config=config, credentials=credentials, **options
    )


def nothing_half_copied(
    endpoint: S3Endpoint, bucket: str, folder: Path, objects: dict[str, bytes]
) -> None:
    """No temporary left, no `_complete`, every file there whole, the copy not taken as made."""
    assert not (folder / COMPLETE).exists()
    assert not [p for p in folder.rglob(".*") if p.name.endswith(".tmp")]
    for path in folder.rglob("*.bin"):
        assert path.read_bytes() == objects[f"data/{path.name}"]
    config = ReaderConfig(endpoint_url=endpoint.url, region=endpoint.region)
    state = local_copy_state(f"s3://{bucket}/data/", folder, config=config)
    assert state is not None


def test_a_copy_larger_than_the_disk_is_refused_before_a_byte_is_fetched(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_disk: Path
) -> None:
    objects = put(s3_client, s3_bucket, 12)  # 3 MiB for a 2 MiB disk
    folder = small_disk / "copy"
    with pytest.raises(OSError) as raised:
        copy(s3_endpoint, s3_bucket, folder, progress=None)
    assert raised.value.errno == errno.ENOSPC
    assert re.fullmatch(
        rf"\[Errno 28\] no space left for the local copy in {folder}: 2\.0 MiB free on its "
        r"disk, 3\.0 MiB needed for the 12 objects still to copy \(3\.0 MiB in the copy\); "
        r"what was written whole is kept and the copy is not taken as complete: free space "
        r"there, or give local_copy_dir a folder on a larger disk, then prepare again",
        str(raised.value),
    ), str(raised.value)
    assert not list(folder.rglob("*.bin"))
    nothing_half_copied(s3_endpoint, s3_bucket, folder, objects)
    remount(small_disk, "8m")
    copy(s3_endpoint, s3_bucket, folder, progress=None)
    assert local_copy_state(
        f"s3://{s3_bucket}/data/", folder,
        config=ReaderConfig(endpoint_url=s3_endpoint.url, region=s3_endpoint.region),
    ) is None  # fmt: skip
    assert {f"data/{p.name}": p.read_bytes() for p in folder.rglob("*.bin")} == objects


def test_a_disk_filled_during_the_copy_keeps_what_was_whole_and_a_later_copy_completes(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, small_disk: Path
) -> None:
    """Another writer fills the disk once the copy has started (after its check of the space):
    the copy stops at the object that did not fit."""
    objects = put(s3_client, s3_bucket, 6)  # 1.5 MiB: fits the 2 MiB disk as it was
    folder, filler = small_disk / "copy", small_disk / "filler"

    def another_writer(line: str) -> None:
        if line.startswith("copying"):
            filler.write_bytes(b"\0" * 2**20)

    with pytest.raises(OSError) as raised:
        copy(s3_endpoint, s3_bucket, folder, progress=another_writer)
    message = str(raised.value)
    assert raised.value.errno == errno.ENOSPC
    match = re.match(
        rf"\[Errno 28\] no space left for the local copy in {folder}: (\d+(?:\.\d)? KiB) free "
        r"on its disk, (\d+)\.0 KiB needed for the (\d) objects still to copy \(1\.5 MiB in "
        r"the copy\)",
        message,
    )
    assert match is not None, message
    whole = len(list(folder.rglob("*.bin")))
    assert 1 <= whole < 6 and int(match.group(3)) == 6 - whole
    assert int(match.group(2)) == (6 - whole) * OBJECT // 2**10
    assert isinstance(raised.value.__cause__, OSError)  # the write's own ENOSPC
    nothing_half_copied(s3_endpoint, s3_bucket, folder, objects)
    manifest = json.loads((folder / MANIFEST).read_text())
    for key, (size, _etag) in manifest.items():  # it vouches only for files written whole
        assert (folder / key.split("/", 1)[1]).read_bytes() == objects[key] and size == OBJECT
    filler.unlink()
    copy(s3_endpoint, s3_bucket, folder, progress=None)
    assert (folder / COMPLETE).exists()
    assert {f"data/{p.name}": p.read_bytes() for p in folder.rglob("*.bin")} == objects

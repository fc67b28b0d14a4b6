"""A sample that fails to read or decode: raised naming the object by default, or skipped and
counted up to a cap, in every process of a DataLoader; the real S3 server deletes objects under
the reader."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from torch.utils.data import DataLoader

from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ReaderConfig, S3IterableDataset, S3MapDataset
from native_loader.decoders import collate_list, decode_image, decode_sample
from native_loader.sample_errors import SampleError, SamplePolicy
from tests.native.conftest import tar_bytes

SKIP = SamplePolicy("skip", max_skipped_share=0.05)


def _jpeg(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (8, 8, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """41 images, one of them corrupt (img_17.jpg)."""
    for i in range(41):
        data = b"this is no jpeg" if i == 17 else _jpeg(i)
        (tmp_path / f"img_{i:02d}.jpg").write_bytes(data)
    return tmp_path


def test_a_corrupt_image_is_raised_naming_the_object_by_default(images: Path) -> None:
    dataset = S3IterableDataset(f"{images}/", transform=decode_image)
    with pytest.raises(SampleError) as info:
        list(dataset)
    assert str(info.value).startswith(
        f"the default decoder (decode_image) failed on {images}/img_17.jpg: "
        "UnidentifiedImageError: cannot identify image file"
    )
    assert type(info.value.__cause__).__name__ == "UnidentifiedImageError"


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("workers", [0, 2])
def test_skip_leaves_it_out_and_counts_it_in_every_worker(images: Path, workers: int) -> None:
    dataset = S3IterableDataset(f"{images}/", transform=decode_image, on_error=SKIP)
    loader = DataLoader(
        dataset, batch_size=8, num_workers=workers, collate_fn=collate_list,
        multiprocessing_context="fork" if workers else None,
    )  # fmt: skip
    samples = [s for batch in loader for s in batch]
    assert len(samples) == 40
    assert dataset.sample_stats() == {"samples_seen": 41, "samples_skipped": 1}


def test_skip_raises_once_the_share_skipped_passes_the_cap(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"bad_{i:02d}.jpg").write_bytes(b"no jpeg")
    dataset = S3IterableDataset(f"{tmp_path}/", transform=decode_image, on_error=SKIP)
    with pytest.raises(
        SampleError, match=r"6 of 6 samples failed, over the max_skipped_share=0.05"
    ):
        list(dataset)


def test_your_transform_is_named_as_yours(images: Path) -> None:
    def transform(data: Any) -> Any:
        raise RuntimeError("boom\nsecond line")

    dataset = S3IterableDataset([f"{images}/img_03.jpg"], transform=transform)
    with pytest.raises(
        SampleError, match=r"^your transform failed on .*img_03\.jpg: RuntimeError: boom$"
    ):
        list(dataset)


def test_a_file_name_that_is_not_utf8_is_named_clearly(images: Path) -> None:
    os.rename(images / "img_05.jpg", os.path.join(os.fsencode(images), b"img_\xff.jpg"))
    with pytest.raises(
        SampleError, match=r"img_\\xff\.jpg failed: its file name is not valid UTF-8"
    ):
        list(S3IterableDataset(f"{images}/", transform=decode_image))
    skipping = S3IterableDataset(f"{images}/", transform=decode_image, on_error=SKIP)
    assert len(list(skipping)) == 39  # the corrupt one and the unnamed one
    assert skipping.sample_stats()["samples_skipped"] == 2


def test_a_corrupt_tar_shard_is_named_or_skipped(tmp_path: Path) -> None:
    for shard in range(3):
        # tarfile's default format, as a shard a user writes with tarfile.open(mode="w")
        body = tar_bytes({f"s{shard}_{i}": {"jpg": _jpeg(i)} for i in range(4)}, tarfile.PAX_FORMAT)
        (tmp_path / f"shard-{shard}.tar").write_bytes(body[:700] if shard == 1 else body)
    dataset = S3IterableDataset(f"{tmp_path}/", tar_samples=True, transform=decode_sample)
    with pytest.raises(SampleError, match=r"reading the tar shard failed on .*shard-1\.tar"):
        list(dataset)
    skipping = S3IterableDataset(
        f"{tmp_path}/", tar_samples=True, transform=decode_sample,
        on_error=SamplePolicy("skip", max_skipped_share=0.5),
    )  # fmt: skip
    assert len(list(skipping)) == 8


def _setup(endpoint: S3Endpoint) -> tuple[ReaderConfig, Credentials]:
    config = ReaderConfig(endpoint_url=endpoint.url, region=endpoint.region)
    return config, Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_objects_deleted_after_the_listing_are_named_or_skipped(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    for i in range(30):
        s3_client.put_object(Bucket=s3_bucket, Key=f"imgs/{i:02d}.jpg", Body=_jpeg(i))
    config, credentials = _setup(s3_endpoint)
    uri = f"s3://{s3_bucket}/imgs/"
    strict = S3IterableDataset(uri, config=config, credentials=credentials, transform=decode_image)
    skipping = S3IterableDataset(
        uri, config=config, credentials=credentials, transform=decode_image,
        on_error=SamplePolicy("skip", max_skipped_share=0.1),
    )  # fmt: skip
    strict.uris(), skipping.uris()  # listed, then the objects go away
    for gone in ("07", "21"):
        s3_client.delete_object(Bucket=s3_bucket, Key=f"imgs/{gone}.jpg")
    with pytest.raises(FileNotFoundError, match=f"{uri}07.jpg"):
        list(DataLoader(strict, batch_size=4, collate_fn=collate_list))
    loader = DataLoader(
        skipping, batch_size=4, num_workers=2, collate_fn=collate_list,
        multiprocessing_context="fork",
    )  # fmt: skip
    assert sum(len(batch) for batch in loader) == 28
    assert skipping.sample_stats() == {"samples_seen": 30, "samples_skipped": 2}


def test_a_map_dataset_skips_into_a_shorter_batch(images: Path) -> None:
    files = sorted(str(p) for p in images.glob("*.jpg"))
    with pytest.raises(SampleError, match=r"img_17\.jpg"):
        S3MapDataset(files, transform=decode_image)[17]
    dataset = S3MapDataset(files, transform=decode_image, on_error=SKIP)
    batches = list(DataLoader(dataset, batch_size=41, collate_fn=collate_list))
    assert len(batches[0]) == 40 and dataset.sample_stats()["samples_skipped"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"on_error": "ignore"}, "must be one of"), ({"max_skipped_share": 1.5}, r"in \[0, 1\]")],
)
def test_the_policy_refuses_nonsense(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplePolicy(**kwargs)


def test_an_iterator_left_open_until_exit_ends_the_process_cleanly(images: Path) -> None:
    """An iterator left open is cleaned up while the interpreter exits: its sample counts'
    flush printed an ImportError there, and a read-ahead thread coming back from a native read
    during finalization aborted the process ("terminate called without an active exception",
    5 to 7 runs in 10)."""
    import subprocess
    import sys

    script = (
        "from native_loader import S3IterableDataset\n"
        f"it = iter(S3IterableDataset({str(images) + '/'!r}))\n"
        "next(it); next(it)\n"
        "print('left open')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "left open"
    assert "Exception ignored" not in done.stderr and "terminate" not in done.stderr, done.stderr

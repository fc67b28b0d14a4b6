"""Deterministic demo datasets, generated in seconds, into an S3 bucket or a local folder.

Three layouts of the same kind of data, the shapes the advisor must tell apart:
  small-images/  many 50-200 KB JPEG images, ImageFolder layout (label = class_NN prefix)
  shards/        the same samples packed in ~64 MB tar shards (WebDataset: NNNNNN.jpg + NNNNNN.cls)
  large/         a few large float32 NumPy (.npy) tensor files
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tarfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.core.bounds import bounded, check_ranges
from advisor.core.homecache import ENV_DEMO_CACHE, demo_root
from advisor.demo.digests import Digests, folder_digests

if TYPE_CHECKING:
    from advisor.demo.server import S3Endpoint

DEMO_BUCKET = "loader-advisor-demo"
LAYOUTS = ("small-images", "shards", "large")
_JPEG_BYTES_PER_PIXEL = 0.78  # measured for the noise pattern below at quality 85
_NOISE_SIDE = 1024

Progress = Callable[[str, int, int], None]  # (layout, done, total)


@dataclass(frozen=True)
class DemoSpec:
    """Sizes of the demo datasets. Defaults: ~250 MB of images, 4 shards, 3 x 64 MiB tensors.

    images: number of JPEG samples; image_kb: (min, max) encoded size in KB; classes: labels;
    shard_mb: target tar shard size in MB; large_files / large_mb: count and size of .npy files;
    seed: everything is derived from it, so the same spec gives the same bytes.
    """

    images: int = bounded(2000, 0, 1_000_000, unit="images")
    image_kb: tuple[int, int] = (50, 200)
    classes: int = bounded(10, 1, 1000, unit="classes")
    shard_mb: float = bounded(64.0, 0, 10_000, low_open=True, unit="MB")
    large_files: int = bounded(3, 0, 100, unit="files")
    large_mb: float = bounded(64.0, 0, 10_000, low_open=True, unit="MiB")
    seed: int = 0

    def __post_init__(self) -> None:
        lo, hi = self.image_kb
        if not 1 <= lo <= hi <= 4096:
            raise ValueError(f"image_kb={self.image_kb} must satisfy 1 <= min <= max <= 4096")
        check_ranges(self)


@dataclass(frozen=True)
class DemoObject:
    key: str
    data: bytes


def _jpeg(noise: np.ndarray, rng: np.random.Generator, target_bytes: int) -> bytes:
    from PIL import Image

    side = int(min(_NOISE_SIDE, max(16, (target_bytes / _JPEG_BYTES_PER_PIXEL) ** 0.5)))
    y, x = rng.integers(0, _NOISE_SIDE - side + 1, size=2)
    tint = rng.integers(0, 256, size=3, dtype=np.uint8)
    # uint8 wrap-around: a cheap per-image colour. Each row of the crop is contiguous, so the
    # tint is added row by row (a row of side x 3 bytes): over the (side, side, 3) view numpy's
    # inner loop is the 3 channels, 27x slower for the same bytes.
    crop = noise[y : y + side, x : x + side].reshape(side, side * 3)
    pixels = (crop + np.tile(tint, side)).reshape(side, side, 3)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


def iter_samples(spec: DemoSpec) -> Iterator[tuple[int, int, bytes]]:
    """(index, label, jpeg bytes) for every demo image, deterministic for a spec."""
    rng = np.random.default_rng(spec.seed)
    noise = rng.integers(0, 256, size=(_NOISE_SIDE, _NOISE_SIDE, 3), dtype=np.uint8)
    lo, hi = spec.image_kb
    for index in range(spec.images):
        target = int(rng.integers(lo * 1024, hi * 1024 + 1))
        label = int(rng.integers(0, spec.classes))
        yield index, label, _jpeg(noise, rng, target)


def pack_tar(members: list[tuple[str, bytes]]) -> bytes:
    """A deterministic tar archive (mtime 0) of (name, data) members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def iter_objects(
    spec: DemoSpec, layouts: Sequence[str] = LAYOUTS
) -> Iterator[tuple[str, DemoObject]]:
    """(layout, object) for the `layouts` asked for (all three by default), streaming: shards are
    emitted as they fill up. A layout not asked for is not generated."""
    unknown = set(layouts) - set(LAYOUTS)
    if unknown:
        raise ValueError(f"unknown demo layout {sorted(unknown)[0]!r}; choose from {LAYOUTS}")
    images, shards = "small-images" in layouts, "shards" in layouts
    shard_limit = int(spec.shard_mb * 1e6)
    members: list[tuple[str, bytes]] = []
    member_bytes = 0
    shard_index = 0
    for index, label, jpeg in iter_samples(spec) if images or shards else ():
        if images:
            key = f"small-images/class_{label:02d}/{index:06d}.jpg"
            yield "small-images", DemoObject(key, jpeg)
        if not shards:
            continue
        members += [(f"{index:06d}.jpg", jpeg), (f"{index:06d}.cls", str(label).encode())]
        member_bytes += len(jpeg) + 2 * 512  # + tar headers
        if member_bytes >= shard_limit or index == spec.images - 1:
            yield "shards", DemoObject(f"shards/shard-{shard_index:06d}.tar", pack_tar(members))
            members, member_bytes, shard_index = [], 0, shard_index + 1
    if "large" not in layouts:
        return
    rng = np.random.default_rng(spec.seed + 1)
    elements = int(spec.large_mb * 2**20) // 4
    for index in range(spec.large_files):
        array = rng.standard_normal(elements, dtype=np.float32)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        yield "large", DemoObject(f"large/tensor-{index:03d}.npy", buffer.getvalue())


def upload(
    endpoint: S3Endpoint,
    bucket: str = DEMO_BUCKET,
    spec: DemoSpec | None = None,
    progress: Progress | None = None,
    layouts: Sequence[str] = LAYOUTS,
    cache: Path | None = None,
) -> dict[str, str]:
    """Put the demo datasets of `layouts` into `bucket` (created if missing): read from `cache`
    (a `DemoCache` folder) where it holds them, else generated (and kept there when given).
    Returns layout -> URI for the layouts uploaded."""
    spec = spec or DemoSpec()
    objects = (
        DemoCache(cache, spec).objects(layouts)
        if cache is not None
        else iter_objects(spec, layouts)
    )
    client = endpoint.boto3_client()
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    done = dict.fromkeys(LAYOUTS, 0)
    totals = _expected_counts(spec)
    # A bounded number of uploads in flight keeps memory flat however large the spec.
    with ThreadPoolExecutor(max_workers=8) as pool:
        in_flight = []
        for layout, obj in objects:
            in_flight.append(
                pool.submit(client.put_object, Bucket=bucket, Key=obj.key, Body=obj.data)
            )
            done[layout] += 1
            if len(in_flight) >= 32:
                in_flight.pop(0).result()
            if progress:
                progress(layout, done[layout], totals[layout])
        for future in in_flight:
            future.result()
    return {layout: f"s3://{bucket}/{layout}/" for layout in layouts}


def write_folder(root: Path, spec: DemoSpec | None = None) -> dict[str, str]:
    """Generate the demo datasets as files under `root`. Returns layout -> folder path."""
    spec = spec or DemoSpec()
    for _, obj in iter_objects(spec):
        path = root / obj.key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(obj.data)
    return {layout: os.fspath(root / layout) for layout in LAYOUTS}


def expected_bytes(spec: DemoSpec) -> dict[str, float]:
    """About how many bytes each layout holds (for progress bars)."""
    images = spec.images * (spec.image_kb[0] + spec.image_kb[1]) / 2 * 1024
    return {
        "small-images": images,
        "shards": images,
        "large": spec.large_files * spec.large_mb * 2**20,
    }


def _expected_counts(spec: DemoSpec) -> dict[str, int]:
    mean_bytes = (spec.image_kb[0] + spec.image_kb[1]) / 2 * 1024 + 2048  # + tar headers
    shards = max(1, round(spec.images * mean_bytes / (spec.shard_mb * 1e6))) if spec.images else 0
    return {"small-images": spec.images, "shards": shards, "large": spec.large_files}


# Bump when the generated bytes change for the same spec (the generator, the JPEG settings): a
# cache written by another version is then never read.
DEMO_DATA_VERSION = 1
ENV_CACHE = ENV_DEMO_CACHE
COMPLETE = ".complete"  # a kept layout's stamp: {"version": ..., "files": {path: [size, sha256]}}


def _is_stamp(path: Path) -> bool:
    return path.name == COMPLETE


def default_cache_root() -> Path:
    """Where generated demo data is kept across kernels: $LOADER_ADVISOR_DEMO_CACHE, else
    $XDG_CACHE_HOME/loader-advisor/demo, else ~/.cache/loader-advisor/demo (the home cache's
    `demo` entry, `python -m advisor cache`)."""
    return demo_root()


def data_identity(spec: DemoSpec) -> str:
    """What names the demo's data wherever a server serves it: its version and its spec
    ("v1-<digest>"), the same bytes on every kernel's port (its cache folder's name)."""
    return f"v{DEMO_DATA_VERSION}-{hashlib.sha256(repr(spec).encode()).hexdigest()[:12]}"


class DemoCache:
    """Generated demo objects kept as files under `<root>/v<version>-<spec digest>/<layout>/`,
    so that a second kernel uploads them without generating them again. A layout's folder
    appears whole or not at all (written beside it, then renamed); its `.complete` records each
    file's size and SHA-256, checked before the files are served: a layout whose files changed
    on disk (a zeroed JPEG) is removed and generated again."""

    def __init__(self, root: Path, spec: DemoSpec) -> None:
        self.folder = root / data_identity(spec)
        self.spec = spec

    def has(self, layout: str) -> bool:
        """True when `layout` is kept whole: the files its `.complete` lists, each as it was
        written. A kept layout that is not (or whose `.complete` records no digests, as an
        earlier version wrote it) is removed, so that it is generated again."""
        folder = self.folder / layout
        try:
            recorded = json.loads((folder / COMPLETE).read_text()).get("files")
        except (OSError, ValueError, AttributeError):
            recorded = None
        if recorded is not None and folder_digests(folder, _is_stamp) == recorded:
            return True
        if folder.exists():
            doomed = folder.with_name(f"{layout}.discarded-{os.getpid()}")
            with contextlib.suppress(OSError):  # another kernel removed it first
                folder.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        return False

    def objects(self, layouts: Sequence[str]) -> Iterator[tuple[str, DemoObject]]:
        """(layout, object) for `layouts`: read from the cache where complete, else generated
        and written to it as they stream by."""
        missing = [layout for layout in layouts if not self.has(layout)]
        for layout in layouts:
            if layout not in missing:
                yield from self._read(layout)
        if missing:
            yield from self._generate(missing)

    def _read(self, layout: str) -> Iterator[tuple[str, DemoObject]]:
        root = self.folder / layout
        for path in sorted(root.rglob("*")):
            if path.is_file() and not _is_stamp(path):
                key = f"{layout}/{path.relative_to(root).as_posix()}"
                yield layout, DemoObject(key, path.read_bytes())

    def _generate(self, layouts: Sequence[str]) -> Iterator[tuple[str, DemoObject]]:
        partial = {layout: self.folder / f"{layout}.partial-{os.getpid()}" for layout in layouts}
        for folder in partial.values():
            shutil.rmtree(folder, ignore_errors=True)
        written: dict[str, Digests] = {layout: {} for layout in layouts}
        for layout, obj in iter_objects(self.spec, layouts):
            relative = obj.key.split("/", 1)[1]
            path = partial[layout] / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(obj.data)
            # the digest of the bytes generated, not of what the disk gave back
            written[layout][relative] = [len(obj.data), hashlib.sha256(obj.data).hexdigest()]
            yield layout, obj
        for layout, folder in partial.items():
            folder.mkdir(parents=True, exist_ok=True)
            stamp = {"version": DEMO_DATA_VERSION, "files": written[layout]}
            (folder / COMPLETE).write_text(json.dumps(stamp) + "\n")
            try:
                folder.rename(self.folder / layout)
            except OSError:  # another kernel finished the same layout first: keep theirs
                shutil.rmtree(folder, ignore_errors=True)

"""The loaders `python -m bench e2e` compares, each built as its users build it, and one timed run.

    python -m bench.e2e_loaders --spec run.json

runs one loader over one data set in this process (and its DataLoader workers) and prints one JSON
line: time to the first batch, the first epoch's time, samples and CPU seconds (this process and
its workers, live or joined), and the time of each later epoch. The orchestrator (`bench.e2e`)
runs each in a fresh process and samples the RSS of the whole process tree from outside.

The training loop is the same for every loader: take batches until `samples` samples arrived,
and after each batch wait `len(batch) / consumer_rate` seconds, the host's view of a GPU step.
The first epoch starts when the loader is built (a fresh process, a fresh cache folder); each
later epoch iterates the same loader again (the exported one reads its cache or local copy then,
with its persistent workers; the peers read S3 again, with new workers).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

IMAGE_SIDE = 224
_CACHE_DIRS: list[str] = []  # removed when the run ends (a first epoch's copies, up to 600 MB)


@dataclass(frozen=True)
class RunSpec:
    """One timed run. `loader` names a builder in `LOADERS`; `keys` are the objects under
    ``bucket`` (path-style on `endpoint`); `transform` is "decode" (JPEG decode and resize),
    "bytes" (the object's bytes) or "lines" (text shards read as lines). `export` is the module
    `python -m advisor recommend --export` wrote for this scenario (the exported loader only)."""

    loader: str
    endpoint: str
    bucket: str
    prefix: str
    keys: list[str]
    transform: str
    batch_size: int
    num_workers: int
    samples: int
    consumer_rate: float | None
    region: str = "us-east-1"
    export: str = ""
    epochs: int = 1  # the first (timed from building the loader) and the later ones


@dataclass(frozen=True)
class RunResult:
    first_batch_s: float
    first_batch_samples: int
    epoch_s: float
    samples: int
    cpu_s: float  # the first epoch's: this process and its DataLoader workers, from building it
    num_workers: int
    later_epoch_s: list[float]  # each later epoch, from iter(loader) to its last batch


# --- per-sample work, the same for every loader --------------------------------------------------


def decode_resize(data: Any) -> torch.Tensor:
    """JPEG bytes -> 3x224x224 uint8 tensor: Pillow decode, RGB, bilinear resize (a CV input)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(memoryview(data))) as image:
        resized = image.convert("RGB").resize((IMAGE_SIDE, IMAGE_SIDE), Image.Resampling.BILINEAR)
        return torch.from_numpy(np.asarray(resized).copy()).permute(2, 0, 1)


def as_bytes(data: Any) -> bytes:
    """The object's bytes, untouched (a copy only where the loader hands out a view)."""
    return data if isinstance(data, bytes) else bytes(memoryview(data))


TRANSFORMS: dict[str, Callable[[Any], Any]] = {"decode": decode_resize, "bytes": as_bytes}


# --- map-style datasets as tutorials write them ------------------------------------------------


class Boto3MapDataset(Dataset[Any]):
    """The tutorial: one boto3 `get_object` per `__getitem__` (a client per process)."""

    def __init__(self, spec: RunSpec, transform: Callable[[Any], Any]) -> None:
        self.spec, self.transform = spec, transform
        self._client: Any = None

    def __len__(self) -> int:
        return len(self.spec.keys)

    def __getitem__(self, index: int) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3",
                endpoint_url=self.spec.endpoint,
                region_name=self.spec.region,
                config=Config(s3={"addressing_style": "path"}),
            )
        key = self.spec.prefix + self.spec.keys[index]
        body = self._client.get_object(Bucket=self.spec.bucket, Key=key)["Body"].read()
        return self.transform(body)


class FsspecMapDataset(Dataset[Any]):
    """fsspec/s3fs: `fs.open(path).read()` per `__getitem__` (a file system per process)."""

    def __init__(self, spec: RunSpec, transform: Callable[[Any], Any]) -> None:
        self.spec, self.transform = spec, transform
        self._fs: Any = None

    def __len__(self) -> int:
        return len(self.spec.keys)

    def __getitem__(self, index: int) -> Any:
        if self._fs is None:
            self._fs = _s3fs(self.spec)
        path = f"{self.spec.bucket}/{self.spec.prefix}{self.spec.keys[index]}"
        with self._fs.open(path, "rb") as f:
            return self.transform(f.read())


def _s3fs(spec: RunSpec) -> Any:
    import fsspec  # type: ignore[import-untyped]

    return fsspec.filesystem(
        "s3",
        endpoint_url=spec.endpoint,
        client_kwargs={"region_name": spec.region},
        config_kwargs={"s3": {"addressing_style": "path"}},
        skip_instance_cache=True,
    )


def _tutorial(dataset_cls: type[Dataset[Any]]) -> Callable[[RunSpec], DataLoader[Any]]:
    def build(spec: RunSpec) -> DataLoader[Any]:
        dataset = dataset_cls(spec, TRANSFORMS[spec.transform])  # type: ignore[call-arg]
        return DataLoader(
            dataset, batch_size=spec.batch_size, shuffle=True, num_workers=spec.num_workers
        )

    return build


# --- s3torchconnector, as its README configures it ----------------------------------------------


def _s3tc(iterable: bool) -> Callable[[RunSpec], DataLoader[Any]]:
    def build(spec: RunSpec) -> DataLoader[Any]:
        from s3torchconnector import S3ClientConfig, S3IterableDataset, S3MapDataset

        decode = TRANSFORMS[spec.transform]
        uri = f"s3://{spec.bucket}/{spec.prefix}"
        common: dict[str, Any] = dict(
            region=spec.region,
            endpoint=spec.endpoint,
            transform=lambda reader: decode(reader.read()),
            s3client_config=S3ClientConfig(force_path_style=True),
        )
        if iterable:
            # With workers, sharding must be on or every worker reads the whole data set.
            dataset: Any = S3IterableDataset.from_prefix(
                uri, enable_sharding=spec.num_workers > 0, **common
            )
            return DataLoader(dataset, batch_size=spec.batch_size, num_workers=spec.num_workers)
        dataset = S3MapDataset.from_prefix(uri, **common)
        return DataLoader(
            dataset, batch_size=spec.batch_size, shuffle=True, num_workers=spec.num_workers
        )

    return build


# --- Loader Advisor's exported module ------------------------------------------------------------


def load_export(path: str) -> Any:
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if module_spec is None or module_spec.loader is None:
        raise RuntimeError(f"cannot import the exported module {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _cache_dir() -> str:
    _CACHE_DIRS.append(tempfile.mkdtemp(prefix="bench-e2e-cache-"))
    return _CACHE_DIRS[-1]


def _exported(spec: RunSpec, override_workers: bool = False, fill: bool = False) -> DataLoader[Any]:
    """`make_dataloader()` with nothing overridden but the endpoint (the proxy in front of the
    same server) and fresh local folders (a first epoch from S3, not from an earlier run): the
    cache directory where the export has one, and for a copy-local export the local copy's
    folder, which its `prepare()` (run by `make_dataloader` before the first batch) fills; with
    `override_workers`, num_workers too. With `fill`, no copy before the first epoch: that
    epoch streams from S3 and fills a cache that the later epochs read."""
    module = load_export(spec.export)
    if fill:
        module.CONFIG["local_copy_dir"] = None
        module.CONFIG["cache_dir"] = _cache_dir()
    extra: dict[str, Any] = {"num_workers": spec.num_workers} if override_workers else {}
    if not fill and module.CONFIG.get("local_copy_dir"):
        # left as exported, every run after the first would read the copy the first one made
        extra["local_copy_dir"] = os.path.join(_cache_dir(), "copy")
    if module.CONFIG.get("cache_dir"):
        # only where the export caches: a folder given to one that does not would add a
        # cache (a second copy of every object) that the advice did not ask for
        extra["cache_dir"] = _cache_dir()
    loader: DataLoader[Any] = module.make_dataloader(endpoint_url=spec.endpoint, **extra)
    return loader


# --- text shards read as lines (the seeds' shape) -----------------------------------------------


class Lines(IterableDataset[str]):
    """Every line of text shards, each shard a text file opened by `open_shard`; the shards are
    split between DataLoader workers. The line iteration is the same for native and fsspec."""

    def __init__(self, shards: Callable[[int, int], Iterator[io.TextIOBase]]) -> None:
        self.shards = shards

    def __iter__(self) -> Iterator[str]:
        info = get_worker_info()
        index, count = (info.id, info.num_workers) if info else (0, 1)
        for text in self.shards(index, count):
            with text:
                yield from text


def _lines_fsspec(spec: RunSpec) -> DataLoader[Any]:
    def shards(index: int, count: int) -> Iterator[io.TextIOBase]:
        fs = _s3fs(spec)
        for key in spec.keys[index::count]:
            yield fs.open(f"{spec.bucket}/{spec.prefix}{key}", "rt")

    return DataLoader(Lines(shards), batch_size=spec.batch_size, num_workers=spec.num_workers)


def _lines_native(spec: RunSpec) -> DataLoader[Any]:
    """native_loader's text records: the exported module's reader settings (requests and bytes
    in flight), each shard streamed by ranged parts and yielded line by line as its parts
    arrive (``records="lines"``), shards in order (no shuffle, as the fsspec loader reads them)
    and split between workers by the dataset; in the DataLoader the exported module builds
    (`native_loader.loader.make_dataloader`, with its prefetch)."""
    from native_loader import ReaderConfig, S3IterableDataset
    from native_loader.loader import LoaderSettings, make_dataloader

    settings = load_export(spec.export).CONFIG
    config = ReaderConfig(
        endpoint_url=spec.endpoint,
        region=settings.get("region") or spec.region,
        max_inflight_requests=settings["max_inflight_requests"],
        max_inflight_bytes=settings["max_inflight_bytes"],
    )
    dataset = S3IterableDataset(f"s3://{spec.bucket}/{spec.prefix}", config=config, records="lines")
    dataset.uris()  # list once here; forked workers share the listing
    loader = LoaderSettings(
        batch_size=spec.batch_size,
        num_workers=spec.num_workers,
        prefetch_factor=settings["loader"]["prefetch_factor"],
    )
    return make_dataloader(dataset, loader)


LOADERS: dict[str, Callable[[RunSpec], DataLoader[Any]]] = {
    "boto3": _tutorial(Boto3MapDataset),
    "fsspec": _tutorial(FsspecMapDataset),
    "s3tc-map": _s3tc(iterable=False),
    "s3tc-iterable": _s3tc(iterable=True),
    "exported": _exported,
    "exported-nw": lambda spec: _exported(spec, override_workers=True),
    "exported-fill": lambda spec: _exported(spec, fill=True),
    "lines-fsspec": _lines_fsspec,
    "lines-native": _lines_native,
}
# The Python packages each loader needs beyond the runtime (a missing one skips the loader).
REQUIRES: dict[str, tuple[str, ...]] = {
    "boto3": ("boto3",),
    "fsspec": ("s3fs",),
    "s3tc-map": ("s3torchconnector",),
    "s3tc-iterable": ("s3torchconnector",),
    "lines-fsspec": ("s3fs",),
}


def missing(loader: str) -> list[str]:
    return [name for name in REQUIRES.get(loader, ()) if importlib.util.find_spec(name) is None]


def _cpu_s() -> float:
    """CPU seconds of this process, of its joined children and of its live ones (persistent
    DataLoader workers, or those of an iterator not yet shut down)."""
    from advisor.measure.hardware.host import cpu_seconds, process_tree

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = sum(cpu_seconds(pid) for pid in process_tree(os.getpid())[1:])
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + live


def _size(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    return len(batch)


def _epoch(loader: DataLoader[Any], spec: RunSpec, t0: float) -> tuple[Any, float, int, int, float]:
    """One epoch of the training loop: (its iterator, still open, so that its workers are not
    shut down inside the timing; seconds from `t0` to the first batch; its samples; samples in
    all; seconds from `t0` to the end of the last step)."""
    batches = iter(loader)
    first = 0.0
    first_samples = samples = 0
    for batch in batches:
        n = _size(batch)
        if not first:
            first, first_samples = time.perf_counter() - t0, n
        samples += n
        if spec.consumer_rate:
            time.sleep(n / spec.consumer_rate)
        if samples >= spec.samples:
            break
    return batches, first, first_samples, samples, time.perf_counter() - t0


def run(spec: RunSpec) -> RunResult:
    """Build the loader, then the training loop: `spec.epochs` epochs of `spec.samples`
    samples, a step per batch."""
    cpu0, t0 = _cpu_s(), time.perf_counter()
    loader = LOADERS[spec.loader](spec)
    workers = loader.num_workers
    batches, first, first_samples, samples, epoch = _epoch(loader, spec, t0)
    cpu = _cpu_s() - cpu0
    later = []
    for _ in range(spec.epochs - 1):
        del batches  # a peer's workers of the last epoch end here, outside the timing
        batches, *_, seconds = _epoch(loader, spec, time.perf_counter())
        later.append(seconds)
    # Join the workers (persistent ones too) before the process ends without teardown.
    shutdown = getattr(batches, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    del batches, loader
    return RunResult(first, first_samples, epoch, samples, cpu, workers, later)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e_loaders", description=__doc__)
    parser.add_argument("--spec", required=True, type=Path)
    args = parser.parse_args(argv)
    spec = RunSpec(**json.loads(args.spec.read_text()))
    if spec.samples < 1 or spec.epochs < 1:
        raise SystemExit("samples and epochs must be >= 1")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the result line alone
            result = run(spec)
    finally:
        for path in _CACHE_DIRS:
            shutil.rmtree(path, ignore_errors=True)
    print(json.dumps(asdict(result)))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: CRT and s3fs threads can hang it after the result


if __name__ == "__main__":
    sys.exit(main())

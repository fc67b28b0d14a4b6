"""One DataLoader factory: the advisor's trial, its recommendation and the module it exports all
build the loader here, so that what was measured is what runs.

    from native_loader.loader import LoaderSettings, make_dataloader, make_dataset
    dataset = make_dataset("s3://bucket/train/", config=ReaderConfig(max_inflight_requests=64))
    settings = LoaderSettings(batch_size=64, num_workers=4, prefetch_factor=3)
    loader = make_dataloader(dataset, settings)

A batch is a list of `batch_size` samples as the transform returns them (`collate_list`): the
default image decoders give uint8 HWC tensors of differing sizes, which cannot be stacked. Text
shards read as records (``make_dataset(..., records="lines")``) give a batch of `batch_size`
records: lines, parsed JSON lines or CSV rows, each through the transform where one is given.
"""

from __future__ import annotations

import contextlib
import functools
import math
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from native_loader.config import Credentials, ReaderConfig

if TYPE_CHECKING:  # torch loads on first use: the advisor's rules read the settings alone
    import torch

    from native_loader.datasets import S3IterableDataset, Source

DEFAULT_PREFETCH = 2  # torch's own default: batches in flight per worker
PREFETCH_MIN, PREFETCH_MAX = 2, 8


def prefetch_for(stall_s: float, samples_per_s_per_worker: float, batch_size: int) -> int:
    """Batches in flight per worker that cover a stall of `stall_s` (a first-byte p95): the
    batches one worker produces meanwhile, plus the one being consumed, within 2..8."""
    batches = max(stall_s, 0.0) * max(samples_per_s_per_worker, 0.0) / max(batch_size, 1)
    return min(max(math.ceil(batches) + 1, PREFETCH_MIN), PREFETCH_MAX)


@dataclass(frozen=True)
class LoaderSettings:
    """The DataLoader arguments the advice sets: what the trial measures with and what is
    exported. `pin_memory` takes effect only where CUDA is available."""

    batch_size: int
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None  # per worker; None = DEFAULT_PREFETCH with workers

    def dataloader_kwargs(self, cuda_available: bool | None = None) -> dict[str, Any]:
        """The `torch.utils.data.DataLoader` arguments (without the dataset and collate_fn).

        With workers, they persist across epochs (no restart cost per epoch) and keep
        `prefetch_factor` batches each in flight; torch refuses a prefetch without workers."""
        cuda = cuda_available
        if cuda is None:
            import torch

            cuda = torch.cuda.is_available()
        kwargs: dict[str, Any] = {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory and cuda,
        }
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor or DEFAULT_PREFETCH
            kwargs["persistent_workers"] = True
        return kwargs


def make_dataset(
    source: Source,
    *,
    config: ReaderConfig | None = None,
    credentials: Credentials | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> S3IterableDataset:
    """The streaming dataset over `source` read with `config` (the reader settings the advice
    sets: requests and bytes in flight per process). `cache_dir` keeps a local copy that later
    epochs read (`~` expanded); other `options` (transform, shuffle, seed, tar_samples, records,
    rank, world_size, cache_max_bytes, ...) pass through to `S3IterableDataset`."""
    from native_loader.datasets import S3IterableDataset

    if cache_dir is not None:
        cache_dir = os.path.expanduser(os.fspath(cache_dir))
    return S3IterableDataset(
        source, config=config, credentials=credentials, cache_dir=cache_dir, **options
    )


@dataclass(frozen=True)
class FreezeInherited:
    """A DataLoader `worker_init_fn`: the worker first moves every object it inherited into the
    collector's permanent generation (`gc.freeze`), then runs `then` (the caller's own init).

    A forked worker starts with every object of the training process (torch alone brings
    170,000), and its first full collection walks them all: about 0.1 s of CPU in each worker
    on an idle machine (`python -m bench handover`), inside the first batch of a worker that
    decodes, writing to every inherited page, which the fork then copies (Python's `gc.freeze`
    documentation gives the pattern for forked children). Frozen, they are never walked; the
    worker's own objects are collected as usual."""

    then: Callable[[int], None] | None = None

    def __call__(self, worker_id: int) -> None:
        import gc

        gc.freeze()
        if self.then is not None:
            self.then(worker_id)


PIPE_BYTES = 2**20  # Linux's default /proc/sys/fs/pipe-max-size: what any user may ask for


class _WidePipes:
    """A multiprocessing context whose queues' pipes hold PIPE_BYTES, not Linux's default 64 KiB.

    A batch that is not shared memory (lines, bytes, anything a tensor does not carry) crosses
    from a worker through the result queue's pipe: through a 64 KiB pipe, a 600 KB batch of
    text takes ten writes, each waiting for the training process to read the last, and ten
    reads of a fresh buffer each. The training process is the one that must not wait."""

    def Queue(self, maxsize: int = 0) -> Any:  # multiprocessing's name
        queue = super().Queue(maxsize)  # type: ignore[misc]
        reader = getattr(queue, "_reader", None)  # the pipe's read end: either end sizes it
        if reader is not None:
            widen_pipe(reader.fileno())
        return queue


def widen_pipe(fd: int, size: int = PIPE_BYTES) -> None:
    """Make the pipe of `fd` hold `size` bytes where the system allows it (Linux; a size over
    the user's limit leaves it as it was)."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        return
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if set_size is not None:
        with contextlib.suppress(OSError, ValueError):
            fcntl.fcntl(fd, set_size, size)


@functools.cache
def _wide_pipe_context(method: str) -> Any:
    base = type(multiprocessing.get_context(method))
    return type(f"WidePipe{base.__name__}", (_WidePipes, base), {})()


def wide_pipe_context(method: str | None = None) -> Any:
    """The multiprocessing context of start `method` (default: the start method set for this
    process, else the platform's default), with wide queue pipes. Asking does not set the
    process's start method: a `multiprocessing.set_start_method` after it still works."""
    chosen = (
        method
        or multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_all_start_methods()[0]  # documented: the default comes first
    )
    return _wide_pipe_context(chosen)


def make_dataloader(
    dataset: Any, settings: LoaderSettings, **overrides: Any
) -> torch.utils.data.DataLoader[Any]:
    """A DataLoader over `dataset` with `settings`; keyword `overrides` (any DataLoader
    argument: collate_fn, timeout, multiprocessing_context, worker_init_fn, ...) win. Batches
    are lists (`collate_list`) unless a collate_fn is given. Workers freeze what they inherit
    before the caller's `worker_init_fn` runs (`FreezeInherited`), and hand their batches over
    through queues with wide pipes (`wide_pipe_context`; a start method given by name, such as
    ``multiprocessing_context="fork"``, gets them too; a context object is used as it is)."""
    import torch

    from native_loader.decoders import collate_list

    kwargs = {"collate_fn": collate_list, **settings.dataloader_kwargs(), **overrides}
    if kwargs.get("num_workers", 0) == 0:
        # torch refuses these without workers, whoever set them
        kwargs.pop("prefetch_factor", None)
        kwargs["persistent_workers"] = False
    else:
        kwargs["worker_init_fn"] = FreezeInherited(kwargs.get("worker_init_fn"))
        context = kwargs.get("multiprocessing_context")
        if context is None or isinstance(context, str):
            kwargs["multiprocessing_context"] = wide_pipe_context(context)
    return torch.utils.data.DataLoader(dataset, **kwargs)


# --- the local copy a copy-local recommendation reads -------------------------------------------

MANIFEST = "_manifest.json"  # "_" names are metadata: listing the copy leaves it out
COMPLETE = "_complete"


def local_copy_complete(directory: str | os.PathLike[str]) -> bool:
    """True when `copy_to_local` finished copying into `directory`."""
    return os.path.exists(os.path.join(os.path.expanduser(os.fspath(directory)), COMPLETE))


def copy_to_local(
    uri: str,
    directory: str | os.PathLike[str],
    *,
    config: ReaderConfig | None = None,
    credentials: Credentials | None = None,
    progress: Callable[[str], None] | None = print,
) -> str:
    """Copy every object under `uri` into `directory` (the layout of the keys below the
    prefix), so that training reads local files; returns the folder.

    Resumable: an object already copied with its listed size and ETag (the manifest records
    the ETag each file was copied at) is kept; a changed or partly written one is copied
    again. Each file is written under a temporary name and renamed once its size matches the
    listing. `progress` gets a line every 5% of the bytes.
    """
    import json

    from native_loader.reader import S3Reader
    from native_loader.uri import is_metadata, parse_uri

    root = os.path.expanduser(os.fspath(directory))
    os.makedirs(root, exist_ok=True)
    manifest_path = os.path.join(root, MANIFEST)
    manifest: dict[str, list[Any]] = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    complete = os.path.join(root, COMPLETE)
    if os.path.exists(complete):
        os.remove(complete)  # complete again only once this copy checked every object
    _, _, prefix = parse_uri(uri)
    with S3Reader(config or ReaderConfig(), credentials=credentials) as reader:
        listed = [o for o in reader.list(uri) if o.size > 0 and not is_metadata(o.uri, uri)]
        total = sum(o.size for o in listed)

        def target(info: Any) -> str:
            relative = info.key[len(prefix) :].lstrip("/") if prefix else info.key
            return os.path.join(root, relative or os.path.basename(info.key))

        def kept(info: Any) -> bool:
            path = target(info)
            same = manifest.get(info.key) == [info.size, info.etag]
            return same and os.path.exists(path) and os.path.getsize(path) == info.size

        todo = [o for o in listed if not kept(o)]
        done = total - sum(o.size for o in todo)
        step, next_report = max(total // 20, 1), done
        if progress is not None:
            progress(
                f"copying {len(todo):,} of {len(listed):,} objects ({total / 1e6:,.1f} MB in all)"
            )
        for info, result in zip(todo, reader.read_many(todo), strict=True):
            path = target(info)
            if len(result) != info.size:
                raise OSError(f"{info.uri}: read {len(result)} bytes, listed {info.size}")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".part", "wb") as out:
                out.write(memoryview(result))
            os.replace(path + ".part", path)
            manifest[info.key] = [info.size, info.etag]
            done += info.size
            if done >= next_report:
                with open(manifest_path, "w") as f:
                    json.dump(manifest, f)
                next_report = done + step
                if progress is not None:
                    progress(f"copied {done / 1e6:,.1f} of {total / 1e6:,.1f} MB")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    with open(complete, "w") as f:
        f.write(uri + "\n")
    return root

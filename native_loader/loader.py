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


# The local copy lives in native_loader.local_copy; loader modules exported before it import
# these two from here (the `as` names re-export them).
from native_loader.local_copy import copy_to_local as copy_to_local  # noqa: E402
from native_loader.local_copy import local_copy_complete as local_copy_complete  # noqa: E402

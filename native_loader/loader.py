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

A module `advisor.export` writes is its CONFIG (a `native_loader.settings.LoaderConfig` as a
dict) and a face on `from_config`, `dataset_from_config`, `prepare_from_config` and
`loader_stats`: the loader it builds is built here, by the installed runtime.

    loader = from_config(CONFIG, rank=0, world_size=1, num_workers=2)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import multiprocessing
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from native_loader.config import Credentials, ReaderConfig
from native_loader.copy_offline import gone, offline_copy

# Loader modules exported before copies were checked import these two from here (the `as`
# names re-export them); copy_to_local and local_copy_state make and check the copy below.
from native_loader.local_copy import copy_to_local as copy_to_local
from native_loader.local_copy import local_copy_complete as local_copy_complete
from native_loader.local_copy import local_copy_state
from native_loader.settings import DEFAULT_CACHE_MAX_BYTES, LoaderConfig
from native_loader.settings import DEFAULT_PREFETCH as DEFAULT_PREFETCH
from native_loader.settings import LoaderSettings as LoaderSettings

if TYPE_CHECKING:  # torch loads on first use: the advisor's rules read the settings alone
    import torch

    from native_loader.datasets import S3IterableDataset, Source

PREFETCH_MIN, PREFETCH_MAX = 2, 8


def prefetch_for(stall_s: float, samples_per_s_per_worker: float, batch_size: int) -> int:
    """Batches in flight per worker that cover a stall of `stall_s` (a first-byte p95): the
    batches one worker produces meanwhile, plus the one being consumed, within 2..8."""
    batches = max(stall_s, 0.0) * max(samples_per_s_per_worker, 0.0) / max(batch_size, 1)
    return min(max(math.ceil(batches) + 1, PREFETCH_MIN), PREFETCH_MAX)


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
    reads of a fresh buffer each. The training process is the one that must not wait.

    `shm_plan` (a `native_loader.shm.ShmPlan`, set on a loader's own copy): its queues answer a
    batch /dev/shm cannot hold with an error instead of dropping it (`native_loader.shm`)."""

    shm_plan: Any = None

    def Queue(self, maxsize: int = 0) -> Any:  # multiprocessing's name
        if self.shm_plan is None:
            queue = super().Queue(maxsize)  # type: ignore[misc]
        else:
            from native_loader.shm import ShmQueue

            context = self.get_context()  # type: ignore[attr-defined]
            queue = ShmQueue(maxsize, ctx=context, plan=self.shm_plan)
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
    ``multiprocessing_context="fork"``, gets them too; a context object is used as it is).
    A worker that dies (the kernel's out-of-memory killer, a crash) is a `WorkerDied` error
    naming the worker, the signal and the likely cause (`native_loader.watched`); batches
    /dev/shm cannot hold raise `ShmTooSmallError`, one line saying what to change, at the first
    batch, never a wait for a batch that cannot come (`native_loader.shm`). With workers, a
    dataset's prefix is listed here first (`S3IterableDataset.list_objects`)."""
    from native_loader.decoders import collate_list
    from native_loader.watched import WatchedDataLoader

    kwargs = {"collate_fn": collate_list, **settings.dataloader_kwargs(), **overrides}
    list_objects = getattr(dataset, "list_objects", None)
    if kwargs.get("num_workers", 0) > 0 and list_objects is not None:
        list_objects()  # here, once: the forked workers share it instead of each listing
    if kwargs.get("num_workers", 0) == 0:
        # torch refuses these without workers, whoever set them
        kwargs.pop("prefetch_factor", None)
        kwargs["persistent_workers"] = False
    else:
        kwargs["worker_init_fn"] = FreezeInherited(kwargs.get("worker_init_fn"))
        context = kwargs.get("multiprocessing_context")
        if context is None or isinstance(context, str):
            kwargs["multiprocessing_context"] = wide_pipe_context(context)
        from native_loader.shm import guarded_loader  # batches /dev/shm cannot hold: one error

        return guarded_loader(dataset, kwargs)
    return WatchedDataLoader(dataset, **kwargs)


# --- an exported module's loader: its CONFIG and the caller's overrides -----------------------

# the config's settings a caller may override (the DataLoader's are _LOADER_NAMES)
_DATASET_NAMES = frozenset(f.name for f in dataclasses.fields(LoaderConfig)) - {
    "loader", "schema_version",
}  # fmt: skip
_LOADER_NAMES = frozenset(f.name for f in dataclasses.fields(LoaderSettings))


def from_config(
    config: Mapping[str, Any] | LoaderConfig,
    rank: int = 0,
    world_size: int = 1,
    credentials: Credentials | None = None,
    *,
    copy_if_unreachable: bool = False,
    **overrides: Any,
) -> torch.utils.data.DataLoader[Any]:
    """The DataLoader an exported module's CONFIG describes, its dataset sharded for `rank` of
    `world_size` (an exported module's `make_dataloader`). `credentials`: None reads the
    standard AWS chain at run time; they are never part of the config.

    Keyword overrides win over the config: the DataLoader settings (batch_size, num_workers,
    pin_memory, prefetch_factor), the dataset's (transform, as "module:callable" or a
    callable, shuffle, seed, uri, endpoint_url, on_error, max_skipped_share, local_copy_dir,
    cache_dir, ...), and any other DataLoader argument (collate_fn, timeout, ...). ValueError,
    naming what it does not understand, for a config of another schema version or with
    settings this runtime does not know (`LoaderConfig.from_dict`). `copy_if_unreachable`:
    where the endpoint does not answer, read a complete local copy as it was last checked,
    saying so (`native_loader.copy_offline`; the demo's exports ask for it)."""
    exported = _read(config)
    loader = dataclasses.replace(
        exported.loader, **{k: overrides.pop(k) for k in list(overrides) if k in _LOADER_NAMES}
    )
    dataset_overrides = {k: overrides.pop(k) for k in list(overrides) if k in _DATASET_NAMES}
    dataset = dataset_from_config(
        exported, rank, world_size, credentials, copy_if_unreachable=copy_if_unreachable,
        **dataset_overrides,
    )  # fmt: skip
    return make_dataloader(dataset, loader, **overrides)


def dataset_from_config(
    config: Mapping[str, Any] | LoaderConfig,
    rank: int = 0,
    world_size: int = 1,
    credentials: Credentials | None = None,
    *,
    copy_if_unreachable: bool = False,
    **overrides: Any,
) -> S3IterableDataset:
    """The dataset of `from_config` (an exported module's `make_dataset`), listed once here so
    that forked DataLoader workers share the listing (a compact index, saved in the config's
    index_dir, by default the home cache's, so that later runs and the other ranks of the node
    load it while it is younger than index_max_age_s; ``index_max_age_s=0`` lists again, and
    ``index_dir=None`` saves nothing; an unshuffled read streams it: `S3IterableDataset`). A
    copy-local config reads its local copy, checked against the listing at every start and
    brought up to date by this process when it is alone (world_size 1); with ranks, a stale
    copy is an error that asks for `prepare` first. Overrides are the config's settings (the
    DataLoader's are accepted and left to the loader); TypeError names any other."""
    from native_loader.decoders import default_decoder, load_transform

    exported = _read(config)
    transform = overrides.pop("transform", exported.transform)
    settings = _overridden(exported, overrides)
    if transform is None and not settings.records:  # records as they are, unless transformed
        transform = default_decoder(settings.data_format)
    elif isinstance(transform, str):
        transform = load_transform(transform)
    dataset = make_dataset(
        _source(settings, exported, world_size, credentials, copy_if_unreachable),
        config=settings.reader_config(),
        credentials=credentials,
        transform=transform,
        shuffle=settings.shuffle,
        seed=settings.seed,
        shuffle_buffer=settings.shuffle_buffer,
        tar_samples=settings.tar_samples,
        records=settings.records,
        rank=rank,
        world_size=world_size,
        cache_dir=settings.cache_dir,
        cache_max_bytes=settings.cache_max_bytes or DEFAULT_CACHE_MAX_BYTES,
        on_error=settings.sample_policy(),
        index_dir=settings.index_dir,
        index_max_age_s=settings.index_max_age_s,
        save_index=settings.index_dir is not None,
    )
    # list the prefix once here (or load its saved index): forked DataLoader workers share it;
    # an unshuffled read streams the listing instead, its first batch with the first page
    dataset.list_objects()
    return dataset


def say(line: str) -> None:
    """Progress for people: a line on stderr."""
    print(line, file=sys.stderr)


def prepare_from_config(
    config: Mapping[str, Any] | LoaderConfig,
    progress: Callable[[str], None] | None = say,
    credentials: Credentials | None = None,
    *,
    copy_if_unreachable: bool = False,
    **overrides: Any,
) -> str | None:
    """Make the local copy a copy-local config's epochs read, or bring it up to date with the
    listing (`copy_to_local`: objects with their listed size and ETag are kept, changed and new
    ones fetched, removed ones deleted; processes on one node take turns). Returns its folder;
    None when the config reads in place. Overrides (local_copy_dir=..., uri=...) as in
    `dataset_from_config`, and `copy_if_unreachable` as in `from_config`."""
    overrides.pop("transform", None)
    settings = _overridden(_read(config), overrides)
    if not settings.local_copy_dir:
        return None
    try:
        return copy_to_local(
            settings.uri, settings.local_copy_dir, config=settings.reader_config(),
            progress=progress, credentials=credentials,
        )  # fmt: skip
    except (ConnectionError, PermissionError) as exc:
        if not copy_if_unreachable or not _offline(settings, exc, progress):
            raise
        return os.path.expanduser(settings.local_copy_dir)


def loader_stats(loader: Any) -> dict[str, int]:
    """Samples the loader's dataset has seen and skipped so far, in every worker
    (``samples_seen``, ``samples_skipped``), the throttling its readers met (``throttled``:
    answers asking to slow down, 503 SlowDown; ``rate_cuts`` of the send rate;
    ``rate_limited_ms`` requests waited for it) and the requests they sent again
    (``retries``: throttled, failed with a 5xx, reset or cut short)."""
    return {**loader.dataset.sample_stats(), **loader.dataset.reader_stats()}


def _read(config: Mapping[str, Any] | LoaderConfig) -> LoaderConfig:
    return config if isinstance(config, LoaderConfig) else LoaderConfig.from_dict(config)


def _overridden(exported: LoaderConfig, overrides: dict[str, Any]) -> LoaderConfig:
    """`exported` with the config's settings among `overrides` replaced; the DataLoader's are
    left to the loader, and any other name is a TypeError (a typo is not silently ignored)."""
    unknown = sorted(set(overrides) - _DATASET_NAMES - _LOADER_NAMES)
    if unknown:
        raise TypeError(
            f"unknown settings {', '.join(unknown)}: the dataset takes "
            f"{', '.join(sorted(_DATASET_NAMES))}"
        )
    return dataclasses.replace(
        exported, **{k: v for k, v in overrides.items() if k in _DATASET_NAMES}
    )


def _offline(settings: LoaderConfig, exc: OSError, progress: Any) -> bool:
    """True, having said so, when the endpoint is gone and its complete local copy is read."""
    assert settings.local_copy_dir is not None
    if not gone(settings.endpoint_url, exc):
        return False
    copy = offline_copy(settings.uri, settings.local_copy_dir)
    if copy is not None and progress is not None:
        where = settings.endpoint_url or "the endpoint"
        progress(f"{where} cannot be reached: reading {copy}")
    return copy is not None


def _source(
    settings: LoaderConfig,
    exported: LoaderConfig,
    world_size: int,
    credentials: Any,
    copy_if_unreachable: bool = False,
) -> str:
    """Where the dataset reads: the local copy once it is the listing's (checked here, made or
    refreshed with one process), else the data set's URI. Another URI than the export's reads
    in place, as does another endpoint without a local_copy_dir of its own: the exported folder
    is the copy of the export's source, never another's."""
    copy_dir = settings.local_copy_dir
    moved = settings.endpoint_url != exported.endpoint_url and (
        copy_dir == exported.local_copy_dir
    )  # fmt: skip
    if not copy_dir or settings.uri != exported.uri or moved:
        return settings.uri
    config = settings.reader_config()
    try:
        stale = local_copy_state(settings.uri, copy_dir, config=config, credentials=credentials)
    except (ConnectionError, PermissionError) as exc:
        if not copy_if_unreachable or not _offline(settings, exc, say):
            raise
        stale = None
    if stale is not None:
        if world_size > 1:
            raise RuntimeError(
                f"the local copy in {copy_dir} {stale}: make it once per node first, with the "
                "exported module's prepare() or by running the module with --prepare"
            )
        copy_to_local(settings.uri, copy_dir, config=config, progress=say, credentials=credentials)
    return os.path.join(os.path.expanduser(copy_dir), "")

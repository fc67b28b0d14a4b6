"""A DataLoader's batches in /dev/shm at run time: a loader whose batches do not fit says so in
one line (`ShmTooSmallError`), and never waits for a batch that cannot come.

Why a loader in a small /dev/shm (Docker's default is 64 MB) waited forever: a worker's
``put`` of a batch returns at once; the result queue's feeder thread pickles it afterwards, and
torch's reduction moves each tensor into a new /dev/shm segment (``posix_fallocate``: "unable
to allocate shared memory(shm) ... No space left on device" where it is full). multiprocessing's
feeder prints that (``Queue._on_queue_feeder_error``) and drops the batch; the worker, alive,
waits for its next index, and the training process for a batch that never comes: torch's
DataLoader checks only that its workers are alive.

The factory's loaders with workers (`native_loader.loader.make_dataloader`) answer every way a
batch cannot fit with one error in the training process, in the batch's place:

- `ShmQueue`, their result queue, checks each worker's first batch before it is sent: the
  batches the loader keeps in flight (workers x prefetch_factor x the batch's bytes, times the
  ranks on the node) against /dev/shm's free bytes when it started. They do not fit: the worker
  sends a `ShmRefusal` instead, which the training process raises.
- A batch whose shared memory cannot be allocated later (other processes took it, a batch
  larger than the first) is answered the same way from the feeder thread (the hook
  ``concurrent.futures`` overrides for the same reason); any other error there (a batch that
  cannot be pickled) is raised as it is rather than dropped.
- A worker killed by SIGBUS (shared memory written past what /dev/shm holds, by code other
  than torch's, which allocates it up front) raises the same error (`ShmGuardedLoader`).
- torch leaves an allocation that found /dev/shm full listed there (empty): what the workers
  left is removed once they have ended (`remove_leftovers`), at the iterator's shutdown or at
  the interpreter's exit.

A refusal in the batch's place was chosen over a watchdog on the training process's wait: it
is raised as soon as the batch would have been, with what the worker measured, and there is no
timeout to choose (a training step may take minutes) and no thread to keep. Planning the
prefetch up front cannot be done here without a batch's bytes, which only the first batch
gives; the advice plans it (SHM-1).

What this leans on that neither library documents (torch 2.13; the queue's parts are alike in
Python 3.10 to 3.13): multiprocessing's ``Queue._on_queue_feeder_error`` (a hook, says its
source), ``_sem``, ``_wlock`` and ``_send_bytes``; torch's ``ExceptionWrapper`` (a worker's
error, re-raised by ``reraise``), ``_MultiProcessingDataLoaderIter`` (``_next_data``,
``_shutdown_workers``, ``_workers``) and ``DataLoader._get_iterator``.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing.queues
import multiprocessing.util
import os
import re
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any, NoReturn

import torch
from torch._utils import ExceptionWrapper
from torch.utils.data._utils.worker import _IterableDatasetStopIteration
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from native_loader.shm_plan import SHM_PATH, ShmTooSmallError, shm_advice, shm_free_bytes
from native_loader.watched import WatchedDataLoader

WALK_LIMIT = 100_000  # objects of one batch looked at for its tensors, at most
LEFTOVER_JOIN_S = 1.0  # a terminated worker's end, waited for before its leftovers go


@dataclass(frozen=True)
class ShmPlan:
    """What a loader keeps in /dev/shm: `workers` x `prefetch` batches a rank, `ranks` on the
    node (torchrun's LOCAL_WORLD_SIZE), in the tmpfs at `path`."""

    workers: int
    prefetch: int
    ranks: int = 1
    path: str = SHM_PATH

    @classmethod
    def of(cls, workers: int, prefetch: int) -> ShmPlan:
        try:
            ranks = max(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), 1)
        except ValueError:
            ranks = 1
        return cls(workers, prefetch, ranks)

    def need(self, batch_bytes: int) -> int:
        """Bytes the batches in flight take, at `batch_bytes` each."""
        return self.ranks * self.workers * self.prefetch * batch_bytes

    def advice(self, room: ShmRoom, batch_bytes: int, cause: str = "") -> str:
        return shm_advice(
            room.free, self.workers, self.prefetch, batch_bytes, ranks=self.ranks,
            used=room.used, cause=cause,
        )  # fmt: skip


@dataclass(frozen=True)
class ShmRoom:
    """/dev/shm as a loader found it when it started: bytes `free`, and `used` by others."""

    free: int
    used: int = 0

    @classmethod
    def now(cls, path: str = SHM_PATH) -> ShmRoom | None:
        free = shm_free_bytes(path)
        if free is None:
            return None
        try:
            st = os.statvfs(path)
            size = st.f_blocks * st.f_frsize
        except OSError:
            size = free
        return cls(free, max(size - free, 0))


def shm_bytes_of(batch: Any, *, shared_too: bool = False) -> int:
    """Bytes `batch` puts in /dev/shm as it crosses from a worker: its CPU tensors' storages,
    each once (with `shared_too`, those already in shared memory too: a batch that arrived)."""
    seen: set[int] = set()
    total = 0
    stack = [batch]
    for _ in range(WALK_LIMIT):
        if not stack:
            break
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.device.type != "cpu" or (item.is_shared() and not shared_too):
                continue
            storage = item.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


def out_of_shm(text: str) -> bool:
    """True for torch's words for a /dev/shm allocation that found no room."""
    return "No space left on device" in text and ("shm" in text or "shared memory" in text)


def remove_leftovers(pids: tuple[int, ...], path: str = SHM_PATH) -> None:
    """Remove what the ended processes `pids` left in /dev/shm: torch names a segment after
    its process and unlinks it once mapped, but one whose allocation found /dev/shm full stays,
    empty and listed. Only under torch's file_descriptor sharing (Linux's default): under
    file_system, named segments are how batches are shared."""
    import torch.multiprocessing

    if torch.multiprocessing.get_sharing_strategy() != "file_descriptor":
        return
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        found = re.fullmatch(r"torch_(\d+)_\d+_\d+", name)
        if found is not None and int(found.group(1)) in pids:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, name))


def killed_by_sigbus(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) is torch's word for a worker a SIGBUS killed."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if "Bus error" in str(seen) or "SIGBUS" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class ShmRefusal(ExceptionWrapper):
    """Sent in place of a batch /dev/shm cannot hold: torch's DataLoader raises what a worker's
    ExceptionWrapper holds, and this one raises `ShmTooSmallError` with its one line."""

    def __init__(self, message: str) -> None:
        self.exc_type = ShmTooSmallError
        self.exc_msg = message
        self.where = "in a DataLoader worker"

    def reraise(self) -> NoReturn:
        raise ShmTooSmallError(self.exc_msg)


def _answer(obj: Any) -> tuple[Any, Any] | None:
    """(index, batch) where `obj` is a worker's answer holding a batch; else None."""
    if not isinstance(obj, tuple) or len(obj) != 2:
        return None
    data = obj[1]
    if data is None or isinstance(data, (ExceptionWrapper, _IterableDatasetStopIteration)):
        return None  # a resume's acknowledgement, an error, the end of an iterable's data
    return obj


class ShmQueue(multiprocessing.queues.Queue):
    """A DataLoader's result queue that answers a batch /dev/shm cannot hold with a
    `ShmRefusal` (module docstring). `plan`: what the loader keeps in flight; /dev/shm's free
    bytes are read when it is made, as the DataLoader starts, before any worker."""

    def __init__(self, maxsize: int = 0, *, ctx: Any, plan: ShmPlan) -> None:
        super().__init__(maxsize, ctx=ctx)
        self._plan = plan
        self._room = ShmRoom.now(plan.path)
        self._checked_in: int | None = None  # the process whose first batch was checked

    def __getstate__(self) -> Any:
        return (super().__getstate__(), self._plan, self._room)

    def __setstate__(self, state: Any) -> None:
        base, self._plan, self._room = state
        super().__setstate__(base)
        self._checked_in = None

    def put(self, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        if self._room is not None:
            obj = self._checked(obj, self._room)
        super().put(obj, block, timeout)

    def _checked(self, obj: Any, room: ShmRoom) -> Any:
        """A worker's answer as sent: a refusal in place of its first batch where the batches
        in flight would not fit, and of an error where its own collate found /dev/shm full."""
        error = obj[1] if isinstance(obj, tuple) and len(obj) == 2 else None
        if (
            isinstance(error, ExceptionWrapper) and not isinstance(error, ShmRefusal)
            and out_of_shm(str(error.exc_msg))
        ):  # fmt: skip
            cause = " (a worker's collate could not put its batch there)"
            return (obj[0], ShmRefusal(self._plan.advice(room, 0, cause)))
        answer = _answer(obj) if self._checked_in != os.getpid() else None
        if answer is None:
            return obj
        self._checked_in = os.getpid()
        size = shm_bytes_of(answer[1])
        if size == 0 or self._plan.need(size) <= room.free:
            return obj
        return (answer[0], ShmRefusal(self._plan.advice(room, size)))

    def _on_queue_feeder_error(self, e: Exception, obj: Any) -> None:
        """The feeder thread could not send `obj`: send its refusal, or the error itself, in its
        place, so that the training process raises rather than waits for it."""
        answer = _answer(obj)
        if answer is None:
            traceback.print_exc()  # what multiprocessing does
            return
        if out_of_shm(str(e)) and self._room is not None:
            free = shm_free_bytes(self._plan.path)
            now = "" if free is None else f", {free / 2**20:,.0f} MiB"
            cause = f" when the loader started{now} when a worker's batch did not fit"
            size = shm_bytes_of(answer[1], shared_too=True)  # part of it may have moved
            reply: ExceptionWrapper = ShmRefusal(self._plan.advice(self._room, size, cause))
        else:
            reply = ExceptionWrapper(
                (type(e), e, e.__traceback__), where="in a DataLoader worker handing its batch over"
            )
        try:
            payload = ForkingPickler.dumps((answer[0], reply))
            # the feeder released the dropped batch's slot; the reply takes it again (the
            # training process's get releases one for it)
            self._sem.acquire()  # type: ignore[attr-defined]
            if self._wlock is None:  # type: ignore[attr-defined]
                self._send_bytes(payload)  # type: ignore[attr-defined]
            else:
                with self._wlock:  # type: ignore[attr-defined]
                    self._send_bytes(payload)  # type: ignore[attr-defined]
        except Exception:  # the training process is gone: nobody waits
            traceback.print_exc()


class _GuardedIterator(_MultiProcessingDataLoaderIter):
    """torch's iterator over workers: a worker killed by SIGBUS is raised as
    `ShmTooSmallError`, and what the workers left in /dev/shm is removed once they have ended
    (at shutdown, or at the interpreter's exit, after multiprocessing has ended them)."""

    def __init__(self, loader: ShmGuardedLoader) -> None:
        self._shm_room = ShmRoom.now(loader.shm_plan.path)
        self._shm_plan = loader.shm_plan
        self._batch_bytes = 0
        super().__init__(loader)
        pids = tuple(w.pid for w in self._workers if w.pid is not None)
        self._leftovers = multiprocessing.util.Finalize(
            None, remove_leftovers, args=(pids, loader.shm_plan.path), exitpriority=-100
        )

    def _next_data(self) -> Any:
        try:
            data = super()._next_data()
        except RuntimeError as exc:
            if self._shm_room is None or not killed_by_sigbus(exc):
                raise
            cause = " (a worker died of a bus error, SIGBUS, writing to it)"
            message = self._shm_plan.advice(self._shm_room, self._batch_bytes, cause)
            raise ShmTooSmallError(message) from None  # torch's words stay its __context__
        if not self._batch_bytes:
            self._batch_bytes = shm_bytes_of(data, shared_too=True)
        return data

    def _shutdown_workers(self) -> None:
        super()._shutdown_workers()
        if not getattr(self, "_shutdown", False):  # Python is exiting: torch left them be
            return
        workers = getattr(self, "_workers", ())
        for w in workers:
            w.join(timeout=LEFTOVER_JOIN_S)  # torch terminates the late ones, without a join
        if hasattr(self, "_leftovers") and not any(w.is_alive() for w in workers):
            self._leftovers()


class ShmGuardedLoader(WatchedDataLoader):
    """The factory's DataLoader with workers (`shm_plan`: what it keeps in flight); its
    iterator raises a worker's death by SIGBUS as `ShmTooSmallError`, before the watch
    (`WatchedDataLoader`) says any other death plainly."""

    shm_plan: ShmPlan

    def _get_iterator(self) -> Any:
        if self.num_workers == 0:
            return super()._get_iterator()
        self.check_worker_number_rationality()
        return _GuardedIterator(self)


def guarded_loader(dataset: Any, kwargs: dict[str, Any]) -> ShmGuardedLoader:
    """The factory's DataLoader with workers (`kwargs` as `make_dataloader` settled them): its
    result queue is a `ShmQueue` where the multiprocessing context is the factory's own (one
    the caller passed is used as it is), and its iterator a `_GuardedIterator`."""
    plan = ShmPlan.of(kwargs["num_workers"], kwargs.get("prefetch_factor") or 2)
    context: Any = kwargs.get("multiprocessing_context")
    if hasattr(context, "shm_plan"):  # the factory's wide-pipe context: this loader's own copy
        context = copy.copy(context)
        context.shm_plan = plan
        kwargs = {**kwargs, "multiprocessing_context": context}
    loader = ShmGuardedLoader(dataset, **kwargs)
    loader.shm_plan = plan
    return loader

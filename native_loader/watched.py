"""The factory's DataLoader: torch's, whose iterators say plainly when a worker dies.

`WatchedDataLoader` is a `torch.utils.data.DataLoader` in every other way. With workers, each
iterator it hands out reads the workers' peak resident memory every `SAMPLE_EVERY_S` while
batches are taken (one small /proc file per worker: `worker_death.WorkerWatch`), and turns
torch's error about a dead worker into `worker_death.WorkerDied`, naming the worker, the signal
and the likely cause with those readings. torch raises that error in two places: from
`next()` ("exited unexpectedly"), caught around it, where the other workers are stopped at
once; and from its SIGCHLD handler, in whatever the training process's main thread runs at that
moment (the training step, as often as not): the handler torch installs is wrapped, once per
process, by one that calls it and says its error the same way (`_SigchldHandler`).
"""

from __future__ import annotations

import signal
import threading
import time
import weakref
from typing import Any

import torch

from native_loader.shm_plan import ShmTooSmallError
from native_loader.worker_death import WORKER_ERRORS, WorkerDied, WorkerWatch

SAMPLE_EVERY_S = 0.25  # the workers' memory is read at most this often (at a batch)

_WATCHES: weakref.WeakSet[WorkerWatch] = weakref.WeakSet()


class WatchedDataLoader(torch.utils.data.DataLoader):
    """A DataLoader whose worker deaths are `WorkerDied` errors that say which worker died, of
    which signal, and the likely cause (memory, with the workers' measured peak)."""

    def __iter__(self) -> Any:
        iterator = super().__iter__()
        workers = getattr(iterator, "_workers", None)  # a torch iterator's worker processes
        if not workers:
            return iterator
        return _WatchedIterator(iterator, _watch_of(iterator, workers))


_BY_ITERATOR: weakref.WeakKeyDictionary[Any, WorkerWatch] = weakref.WeakKeyDictionary()


def _watch_of(iterator: Any, workers: list[Any]) -> WorkerWatch:
    """The one watch of a torch iterator (a persistent loader's serves every epoch)."""
    watch = _BY_ITERATOR.get(iterator)
    if watch is None or watch.workers is not workers:
        watch = _BY_ITERATOR[iterator] = WorkerWatch(workers)
        _WATCHES.add(watch)
        _SigchldHandler.install()
    return watch


class _WatchedIterator:
    """torch's iterator, its worker deaths said plainly; anything else is torch's iterator's
    (a persistent loader resets it, the advisor's trial shuts its workers down)."""

    def __init__(self, iterator: Any, watch: WorkerWatch) -> None:
        self._iterator = iterator
        self._watch = watch
        self._sampled_at = 0.0

    def __iter__(self) -> _WatchedIterator:
        return self

    def __next__(self) -> Any:
        now = time.monotonic()
        if now - self._sampled_at >= SAMPLE_EVERY_S:
            self._sampled_at = now
            self._watch.sample()
        try:
            return next(self._iterator)
        except WORKER_ERRORS as exc:
            # said already: where the SIGCHLD handler raised inside `next()`, or as /dev/shm
            # too small for the batches (`native_loader.shm`, which sees a SIGBUS first)
            said = isinstance(exc, (WorkerDied, ShmTooSmallError))
            died = exc if said else self._watch.explain(exc)
            if died is None:
                raise
            # the epoch cannot go on: the other workers are stopped now, not when the error
            # and the traceback holding this iterator are let go (a notebook keeps the last)
            shutdown = getattr(self._iterator, "_shutdown_workers", None)
            if callable(shutdown):
                shutdown()
            if died is exc:
                raise
            raise died from exc

    def __len__(self) -> int:
        return len(self._iterator)

    def __getattr__(self, name: str) -> Any:
        if name == "_iterator":  # not made yet (a copy): never ask it of itself
            raise AttributeError(name)
        return getattr(self._iterator, name)


class _SigchldHandler:
    """Calls the SIGCHLD handler that was there (torch's) and says its error about a watched
    loader's dead worker as `WorkerDied`; installed once per process, from the main thread
    (where Python runs signal handlers), over a handler torch installed."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: Any) -> None:
        try:
            self.previous(signum, frame)
        except RuntimeError as exc:
            if isinstance(exc, WorkerDied):
                raise
            for watch in list(_WATCHES):
                died = watch.explain(exc)
                if died is not None and died.worker is not None:
                    raise died from exc
            raise

    @classmethod
    def install(cls) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers are set from the main thread only (torch's too)
        current = signal.getsignal(signal.SIGCHLD)
        if isinstance(current, cls) or not callable(current):
            return  # ours already, or no handler of torch's to wrap
        signal.signal(signal.SIGCHLD, cls(current))

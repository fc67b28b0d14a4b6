"""The threads that read local files ahead: at most `LOCAL_THREADS`, started when reads wait and
ended after `IDLE_S` without work, so none outlives the reads it was started for (a notebook
whose loaders are done has no reader threads left, whatever still references them).
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

LOCAL_THREADS = 4
IDLE_S = 2.0  # an idle thread ends after this long: a burst of reads keeps its threads


class IdlePool:
    """A minimal executor: `submit(fn, *args)` returns a Future; threads start on demand."""

    def __init__(self, max_threads: int = LOCAL_THREADS, idle_s: float = IDLE_S) -> None:
        self._max, self._idle_s = max_threads, idle_s
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]]
        self._work = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._waiting = 0  # threads blocked on the queue, ready for work
        self._numbers = 0
        self._stopping = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if self._stopping:  # the interpreter is exiting: no new thread, the read runs here
            _run_one(future, fn, args)
            return future
        self._work.put((future, fn, args))
        with self._lock:
            if self._waiting == 0 and self._threads < self._max:
                self._threads += 1
                self._numbers += 1
                name = f"nl-local_{self._numbers}"
                threading.Thread(target=self._run, name=name, daemon=True).start()
        return future

    def _run(self) -> None:
        while True:
            with self._lock:
                self._waiting += 1
            try:
                future, fn, args = self._work.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    self._waiting -= 1
                    if self._work.empty():  # checked under the lock `submit` starts threads in
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._waiting -= 1
            _run_one(future, fn, args)

    def drain(self, timeout_s: float) -> None:
        """Let the reads queued and running end (at most `timeout_s`), and start no thread
        after: run at interpreter exit, so that no read-ahead thread is inside a native read
        when the interpreter finalizes (a daemon thread that comes back from one then is
        ended by pthread_exit, and the unwinding through the native frames aborts the
        process: "terminate called without an active exception")."""
        self._stopping = True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if self._waiting == self._threads and self._work.empty():
                    return
            time.sleep(0.005)


def _run_one(future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn(*args))
    except BaseException as exc:  # handed to whoever waits on the future
        future.set_exception(exc)


_pool = IdlePool()


def submit_local(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run `fn(*args)` (a local read that releases the GIL) on the read-ahead threads."""
    return _pool.submit(fn, *args)


def _new_pool_in_child() -> None:  # a forked child must not count the parent's threads
    global _pool
    _pool = IdlePool()


os.register_at_fork(after_in_child=_new_pool_in_child)
atexit.register(lambda: _pool.drain(timeout_s=2.0))

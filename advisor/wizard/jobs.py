"""One background job at a time, in a named daemon thread, so the kernel stays responsive.

`JobRunner` knows nothing of the wizard: it runs `work(cancel)` and tells its caller when the job
starts, fails and ends. `cancel()` sets the `threading.Event` the work polls; `wait(timeout)` lets
tests block until the thread has ended; `future` is the running (or last) job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

Work = Callable[[threading.Event], None]


class JobRunningError(RuntimeError):
    """A job was started while another one still runs."""

    def __init__(self, running: str) -> None:
        super().__init__(f"{running} is still running")
        self.running = running


class JobRunner:
    """Runs one job at a time in a daemon thread named `<thread_prefix>-<job>`."""

    def __init__(self, thread_prefix: str) -> None:
        self.thread_prefix = thread_prefix
        self.job: str | None = None  # the running job's name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._future: Future[None] | None = None
        self._cancel = threading.Event()

    @property
    def busy(self) -> bool:
        return self.job is not None

    def start(
        self,
        job: str,
        work: Work,
        *,
        started: Callable[[], None],
        failed: Callable[[BaseException], None],
        ended: Callable[[], None],
    ) -> None:
        """Claim the runner for `job`, call `started()`, then run `work(cancel)` in the thread:
        `failed(exc)` when it raises (nothing escapes the thread into the kernel), `ended()` when
        it is over either way. Raises JobRunningError (and calls nothing) while a job runs."""
        with self._lock:
            if self.job is not None:
                raise JobRunningError(self.job)
            self.job = job
            self._cancel = threading.Event()
            cancel = self._cancel
            future: Future[None] = Future()
            self._future = future
        started()

        def run() -> None:
            future.set_running_or_notify_cancel()
            try:
                work(cancel)
            except BaseException as exc:  # nothing may escape a worker thread into the kernel
                failed(exc)
            finally:
                self.job = None
                ended()
                future.set_result(None)

        self._thread = threading.Thread(target=run, name=f"{self.thread_prefix}-{job}", daemon=True)
        self._thread.start()

    def cancel(self) -> str | None:
        """Ask the running job to stop; its name, or None when nothing runs."""
        job = self.job
        if job is not None:
            self._cancel.set()
        return job

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job (if any) is done and its thread has ended."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    @property
    def future(self) -> Future[None] | None:
        """The running (or last) job; its result is None."""
        return self._future

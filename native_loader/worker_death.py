"""A DataLoader worker that died, said plainly: which worker, which signal, the likely cause.

torch says a worker died in words that name neither the worker nor the cause: "DataLoader
worker (pid(s) 4242) exited unexpectedly", or, from its SIGCHLD handler, "DataLoader worker
(pid 4242) is killed by signal: Killed." A worker killed with SIGKILL was most often killed by
the kernel's out-of-memory killer, which is the one thing the message must say. `explain` turns
torch's error into `WorkerDied`, one line naming the worker (its id among the loader's workers
where they are known), the signal and the likely cause with what was measured of the workers'
memory (`WorkersMemory`). The exported loader (`native_loader.watched`) and `advisor.diagnose`
say it with this one function.

What was measured of the workers' memory, and how, is `native_loader.worker_memory`'s.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from native_loader.worker_memory import WorkersMemory, memory_limit, oom_kills, resident, since

__all__ = [
    "WORKER_ERRORS",
    "WorkerDied",
    "deaths_in",
    "explain",
]

# torch's words (torch/utils/data/dataloader.py and torch/csrc/DataLoader.cpp)
_KILLED = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: ([^.]+)\.")
_EXITED = re.compile(r"DataLoader worker \(pid (\d+)\) exited unexpectedly with exit code (\d+)")
_GONE = re.compile(r"DataLoader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly")
# strsignal's words ("Killed", "Bus error") back to the signal
_BY_DESCRIPTION = {signal.strsignal(s): s for s in signal.Signals if signal.strsignal(s)}
# A batch's tensors come over a socket the worker that made them serves (torch's file_descriptor
# sharing): a worker killed as the batch is taken resets it, and the kernel closes a dying
# process's sockets before its exit status is ready, so torch, finding every worker alive,
# raises the bare connection error. The worker's exit status is awaited this long.
_LOST_WORKER = (ConnectionError, EOFError)
EXIT_WAIT_S = 1.0
# the errors a worker's death reaches the training loop as: torch's words, or a lost connection
WORKER_ERRORS = (RuntimeError, *_LOST_WORKER)


class WorkerDied(RuntimeError):
    """A DataLoader worker died: killed by a signal or exited without an error. The message
    names the worker, the signal (or exit code) and the likely cause; torch's own error is the
    `__cause__`. Attributes: ``worker`` (its id in the loader, None when not known), ``pid``,
    ``signal`` (its name, such as ``"SIGKILL"``, or None) and ``exit_code`` (or None)."""

    def __init__(
        self,
        message: str,
        *,
        worker: int | None = None,
        pid: int = 0,
        signal: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.worker, self.pid, self.signal, self.exit_code = worker, pid, signal, exit_code

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.worker, self.pid, self.signal, self.exit_code)
        return (_rebuild, (str(self.args[0]) if self.args else "", *fields))


def _rebuild(
    message: str, worker: int | None, pid: int, name: str | None, code: int | None
) -> WorkerDied:
    return WorkerDied(message, worker=worker, pid=pid, signal=name, exit_code=code)


@dataclass(frozen=True)
class Death:
    """One worker's end as torch reported it: its pid and the signal that killed it, or the
    code it exited with (both None: torch said only that it exited)."""

    pid: int
    signal: int | None = None
    exit_code: int | None = None


def deaths_in(exc: BaseException) -> list[Death]:
    """The worker deaths torch's error (or an error it caused: its `__cause__` and
    `__context__`, a few deep) reports; [] for any other error."""
    found: dict[int, Death] = {}
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        text = str(seen)
        for pid, description in _KILLED.findall(text):
            found[int(pid)] = Death(int(pid), signal=_BY_DESCRIPTION.get(description.strip()))
        for pid, code in _EXITED.findall(text):
            found.setdefault(int(pid), Death(int(pid), exit_code=int(code)))
        for pids in _GONE.findall(text):
            for pid in pids.replace(",", " ").split():
                found.setdefault(int(pid), Death(int(pid)))
        seen = seen.__cause__ or seen.__context__
    return list(found.values())


def deaths_of(
    exc: BaseException, workers: Sequence[Any] = (), wait_s: float = EXIT_WAIT_S
) -> list[Death]:
    """The worker deaths `exc` reports (`deaths_in`); where it reports none but is a lost
    connection to a process, the workers found dead, their exit status awaited up to `wait_s`
    (none found: [], as for any other error)."""
    deaths = deaths_in(exc)
    if deaths or not workers or not _lost_worker(exc):
        return deaths
    deadline = time.monotonic() + wait_s
    while True:
        dead = [_completed(Death(pid), workers) for pid in _exited(workers)]
        if dead or time.monotonic() >= deadline:
            return dead
        time.sleep(0.01)


def _lost_worker(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, _LOST_WORKER):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _exited(workers: Iterable[Any]) -> list[int]:
    """The pids of the worker processes that have ended (their exit status is ready)."""
    pids = []
    for w in workers:
        try:
            code = w.exitcode
        except (AttributeError, ValueError, OSError):
            continue
        if code is not None and isinstance(getattr(w, "pid", None), int):
            pids.append(w.pid)
    return pids


def explain(
    exc: BaseException,
    workers: Sequence[Any] | None = None,
    memory: WorkersMemory | None = None,
) -> WorkerDied | None:
    """`WorkerDied` for torch's error about a dead worker, None for any other error.

    workers: the loader's worker processes in worker-id order (a torch iterator's, or
    `multiprocessing.Process` objects): they give the worker's id, and the signal or exit
    code where torch's words did not, and the dead one where a lost connection was all torch
    raised (`deaths_of`). memory: what was measured of them."""
    deaths = deaths_of(exc, workers or ())
    if not deaths:
        return None
    ids = {getattr(w, "pid", None): i for i, w in enumerate(workers or ())}
    death = _completed(deaths[0], workers or ())
    worker = ids.get(death.pid)
    name = signal.Signals(death.signal).name if death.signal else None
    return WorkerDied(
        death_message(death, worker, memory),
        worker=worker,
        pid=death.pid,
        signal=name,
        exit_code=death.exit_code,
    )


def _completed(death: Death, workers: Iterable[Any]) -> Death:
    """`death` with its signal or exit code from the worker's process where torch gave none
    (multiprocessing's exitcode: -N for signal N)."""
    if death.signal is not None or death.exit_code is not None:
        return death
    for w in workers:
        if getattr(w, "pid", None) != death.pid:
            continue
        try:
            code = w.exitcode
        except (AttributeError, ValueError, OSError):
            return death
        if isinstance(code, int) and code < 0:
            return Death(death.pid, signal=-code)
        if isinstance(code, int) and code > 0:
            return Death(death.pid, exit_code=code)
    return death


def death_message(death: Death, worker: int | None, memory: WorkersMemory | None) -> str:
    """The one line: the worker, how it ended, the likely cause, the fix."""
    who = "a DataLoader worker" if worker is None else f"DataLoader worker {worker}"
    who += f" (pid {death.pid})"
    if death.signal == signal.SIGKILL:
        return (
            f"{who} was killed by SIGKILL, {_oom_cause(memory)}; {_memory(memory)}; lower "
            "num_workers, prefetch_factor or batch_size, or give the job more memory"
            f"{_no_oom_counted(memory)}"
        )
    if death.signal == signal.SIGBUS:
        return (
            f"{who} was killed by SIGBUS (bus error): the shared memory that carries batches "
            f"(/dev/shm) is likely full; {_memory(memory)}"
        )
    if death.signal is not None:
        sig = signal.Signals(death.signal)
        return (
            f"{who} was killed by {sig.name} ({signal.strsignal(sig) or 'a signal'}): a crash "
            "in native code the worker ran (a decoder, the transform or a library it calls) "
            f"or a signal sent to it; {_memory(memory)}; run with num_workers=0 to "
            "see where"
        )
    how = f"exited with code {death.exit_code}" if death.exit_code else "exited unexpectedly"
    return (
        f"{who} {how} without raising an error, so its traceback is lost; run with "
        "num_workers=0 to see it"
    )


def _oom_cause(memory: WorkersMemory | None) -> str:
    kills = memory.oom_kills if memory is not None else None
    if kills:
        counted = f"{kills} OOM kill{'s' if kills > 1 else ''}"
        return (
            "by the kernel's out-of-memory killer: out of memory (this process's memory cgroup "
            f"counted {counted} while the loader ran)"
        )
    return "as the kernel's out-of-memory killer kills: likely out of memory"


def _no_oom_counted(memory: WorkersMemory | None) -> str:
    if memory is None or memory.oom_kills != 0:
        return ""
    return (
        " (this process's memory cgroup counted no OOM kill, though: a job scheduler or "
        "kill -9 also sends SIGKILL)"
    )


def _memory(memory: WorkersMemory | None) -> str:
    """The workers' measured peak, and how much this process may use."""
    m = memory or WorkersMemory()
    of = f", of {_gib(m.limit_bytes)} this job may use" if m.limit_bytes else ""
    parts = []
    if m.dead_bytes:
        parts.append(f"{_gib(m.dead_bytes)} in this worker")
    if m.peak_bytes and (m.dead_bytes is None or m.peak_bytes > m.dead_bytes):
        parts.append(f"{_gib(m.peak_bytes)} at most in one")
    if m.total_bytes:
        parts.append(f"{_gib(m.total_bytes)} in {m.total_of} together")
    if not parts:
        may_use = f" ({_gib(m.limit_bytes)} this job may use)" if m.limit_bytes else ""
        return f"the workers' memory was not measured{may_use}"
    return f"the workers' measured peak resident memory: {', '.join(parts)}{of}"


def _gib(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB"


class WorkerWatch:
    """The memory of one loader's workers, read as it runs: `sample()` every few batches (the
    kernel's peak of each, so a reading costs one small file per worker), `explain(exc)` at a
    death. `workers`: the worker processes in worker-id order."""

    def __init__(self, workers: Sequence[Any]) -> None:
        self.workers = workers
        self.peaks: dict[int, int] = {}
        self.total = 0
        self._oom_start = oom_kills()

    def sample(self) -> None:
        total = 0
        for worker, w in enumerate(self.workers):
            pid = getattr(w, "pid", None)
            reading = resident(pid) if isinstance(pid, int) else None
            if reading is not None:
                self.peaks[worker] = max(self.peaks.get(worker, 0), reading[1])
                total += reading[0]
        self.total = max(self.total, total)

    def memory(self, dead: int | None = None) -> WorkersMemory:
        """What was measured; `dead`: the id of the worker that died."""
        return WorkersMemory(
            peak_bytes=max(self.peaks.values(), default=0) or None,
            dead_bytes=self.peaks.get(dead) if dead is not None else None,
            total_bytes=self.total or None,
            oom_kills=since(self._oom_start, oom_kills()),
            limit_bytes=memory_limit(),
        )

    def explain(self, exc: BaseException) -> WorkerDied | None:
        """`WorkerDied` for torch's error about one of these workers, else None."""
        deaths = deaths_of(exc, self.workers)
        if not deaths:
            return None
        self.sample()  # the living workers' peaks as they are now
        pids = [getattr(w, "pid", None) for w in self.workers]
        dead = deaths[0].pid
        return explain(exc, self.workers, self.memory(pids.index(dead) if dead in pids else None))

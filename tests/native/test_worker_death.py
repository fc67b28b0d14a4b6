"""A DataLoader worker killed as the kernel's out-of-memory killer kills it (SIGKILL), mid-epoch:
the factory's loader says which worker, which signal and the likely cause with the workers'
measured memory (`native_loader.watched`, `native_loader.worker_death`), whether the death
surfaces in `next()` or in the training step, and torch's other words for a death say the same."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from native_loader.loader import LoaderSettings, make_dataloader, make_dataset
from native_loader.worker_death import WorkerDied, explain
from native_loader.worker_memory import WorkersMemory, memory_limit, oom_kills

BATCHES = 200  # far more than the test reads: the epoch never ends before the kill


def slow_sample(data: memoryview) -> bytes:
    time.sleep(0.01)
    return bytes(data)


def loader_over_files(folder: Path) -> Any:
    for i in range(BATCHES * 2):
        (folder / f"{i:04}.bin").write_bytes(bytes([i % 256]) * 64)
    dataset = make_dataset(f"{folder}/", transform=slow_sample, shuffle=False)
    return make_dataloader(dataset, LoaderSettings(batch_size=2, num_workers=2))


def kill_a_worker(iterator: Any) -> int:
    """SIGKILL one of this loader's own workers (not a process another test left)."""
    pid = iterator._workers[-1].pid
    os.kill(pid, signal.SIGKILL)
    return pid


def torchs_error(cause: BaseException | None) -> bool:
    """What torch raised for a death: its words, or the connection the dead worker reset (when
    the batch was being taken as it died, before its exit status was ready)."""
    return isinstance(cause, ConnectionError) or "DataLoader worker" in str(cause)


def said_plainly(message: str, pid: int) -> None:
    assert re.match(rf"DataLoader worker [01] \(pid {pid}\) was killed by SIGKILL, ", message)
    assert "out-of-memory killer" in message and "out of memory" in message
    assert re.search(r"the workers' measured peak resident memory: \d+ MiB", message), message
    assert "lower num_workers, prefetch_factor or batch_size" in message
    assert "\n" not in message


def test_a_worker_killed_mid_epoch_names_the_worker_the_signal_and_memory(
    tmp_path: Path,
) -> None:
    iterator = iter(loader_over_files(tmp_path))
    for _ in range(3):
        next(iterator)  # the workers are running and their memory has been read
    workers = list(iterator._workers)
    pid = kill_a_worker(iterator)
    deadline = time.monotonic() + 60
    with pytest.raises(RuntimeError) as raised:
        for _ in range(BATCHES):
            assert time.monotonic() < deadline, "the dead worker was never reported"
            next(iterator)
    said_plainly(str(raised.value), pid)
    died = raised.value
    assert isinstance(died, WorkerDied) and died.pid == pid and died.signal == "SIGKILL"
    assert died.worker in (0, 1) and died.exit_code is None
    assert torchs_error(died.__cause__)  # kept
    del iterator  # its workers are stopped: nothing is left behind
    for _ in range(100):
        if not any(w.is_alive() for w in workers):
            break
        time.sleep(0.05)
    assert not any(w.is_alive() for w in workers)


@pytest.mark.timing  # the death lands in the step only if SIGCHLD arrives within its sleep
def test_a_worker_killed_during_the_step_is_said_the_same_way(tmp_path: Path) -> None:
    """torch's SIGCHLD handler raises in whatever the main thread runs: the training step."""
    iterator = iter(loader_over_files(tmp_path))
    next(iterator)
    next(iterator)
    pid = kill_a_worker(iterator)
    with pytest.raises(RuntimeError) as raised:
        time.sleep(5)  # the training step
    said_plainly(str(raised.value), pid)
    del iterator


TORCH_KILLED = "DataLoader worker (pid 4242) is killed by signal: Killed. "
TORCH_BUS = (
    "DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
    "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."
)
TORCH_EXIT = (
    "DataLoader worker (pid 4242) exited unexpectedly with exit code 1. Details are lost due to "
    "multiprocessing. Rerunning with num_workers=0 may give better error trace."
)


class Worker:
    def __init__(self, pid: int, exitcode: int | None = None) -> None:
        self.pid, self.exitcode = pid, exitcode


def test_the_oom_killer_counted_says_out_of_memory_without_doubt() -> None:
    memory = WorkersMemory(
        peak_bytes=3 * 2**30, dead_bytes=3 * 2**30, total_bytes=5 * 2**30, oom_kills=1,
        limit_bytes=8 * 2**30,
    )  # fmt: skip
    died = explain(RuntimeError(TORCH_KILLED), [Worker(11), Worker(4242)], memory)
    assert died is not None and (died.worker, died.signal) == (1, "SIGKILL")
    assert str(died) == (
        "DataLoader worker 1 (pid 4242) was killed by SIGKILL, by the kernel's out-of-memory "
        "killer: out of memory (this process's memory cgroup counted 1 OOM kill while the "
        "loader ran); the workers' measured peak resident memory: 3.0 GiB in this worker, "
        "5.0 GiB in its workers together, of 8.0 GiB this job may use; lower num_workers, "
        "prefetch_factor or batch_size, or give the job more memory"
    )
    assert str(pickle.loads(pickle.dumps(died))) == str(died)
    assert pickle.loads(pickle.dumps(died)).worker == 1


@pytest.mark.parametrize(
    ("torch_says", "workers", "expected"),
    [
        (TORCH_BUS, [Worker(4242)], r"^DataLoader worker 0 \(pid 4242\) was killed by SIGBUS"),
        (TORCH_EXIT, [], r"^a DataLoader worker \(pid 4242\) exited with code 1 without raising"),
        (  # no signal in torch's words: the process's exit code has it
            "DataLoader worker (pid(s) 4242) exited unexpectedly",
            [Worker(7, None), Worker(4242, -signal.SIGKILL)],
            r"^DataLoader worker 1 \(pid 4242\) was killed by SIGKILL, as the kernel's out-of",
        ),
        (
            "DataLoader worker (pid(s) 4242) exited unexpectedly",
            [Worker(4242, -signal.SIGSEGV)],
            r"killed by SIGSEGV \(Segmentation fault\): a crash in native code",
        ),
    ],
)
def test_torchs_words_for_a_death_are_said_plainly(
    torch_says: str, workers: list[Worker], expected: str
) -> None:
    died = explain(RuntimeError(torch_says), workers, WorkersMemory())
    assert died is not None
    assert re.search(expected, str(died)), str(died)


def test_a_death_found_in_the_cause_and_other_errors_left_alone() -> None:
    outer = RuntimeError("DataLoader worker (pid(s) 4242) exited unexpectedly")
    outer.__cause__ = RuntimeError(TORCH_KILLED)
    died = explain(outer)
    assert died is not None and died.signal == "SIGKILL" and died.worker is None
    assert "the workers' memory was not measured" in str(died)
    assert explain(RuntimeError("CUDA out of memory")) is None
    assert explain(ValueError("DataLoader timed out after 5 seconds")) is None


def test_a_connection_reset_by_a_worker_killed_that_moment_names_it() -> None:
    """torch raises the bare error when a worker dies as its batch is taken: the socket that
    passes the batch's shared memory is reset before the kernel has the worker's exit status,
    so torch finds every worker alive. The dead worker is awaited and named; a reset while every
    worker lives is not a death."""
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=time.sleep, args=(60,)) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        reset = ConnectionResetError(104, "Connection reset by peer")
        started = time.monotonic()
        assert explain(reset, workers, WorkersMemory()) is None
        assert 0.9 < time.monotonic() - started < 5  # awaited, within its bound
        assert explain(reset) is None  # no workers to look at: nothing awaited
        os.kill(workers[1].pid, signal.SIGKILL)  # type: ignore[arg-type]
        died = explain(reset, workers, WorkersMemory())  # at once: its exit status is awaited
        assert died is not None and (died.worker, died.signal) == (1, "SIGKILL"), died
        assert died.pid == workers[1].pid
        lost = RuntimeError("a batch could not be read")
        lost.__context__ = EOFError()
        assert explain(lost, workers, WorkersMemory()) is not None
    finally:
        for w in workers:
            w.kill()
            w.join(5)


def test_the_cgroup_readings(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16384 kB\nMemFree: 1 kB\n")
    v1 = tmp_path / "sys/fs/cgroup/memory/job"
    v1.mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("5:cpu:/\n4:memory:/job\n")
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert oom_kills(tmp_path) == 3
    assert memory_limit(tmp_path) == 16384 * 1024  # no limit: the machine's
    (v1 / "memory.limit_in_bytes").write_text(f"{2**31}\n")
    assert memory_limit(tmp_path) == 2**31
    v2 = tmp_path / "sys/fs/cgroup/jobs/one"
    v2.mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/jobs/one\n")
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
    (v2 / "memory.max").write_text("max\n")
    assert oom_kills(tmp_path) == 2
    assert memory_limit(tmp_path) == 16384 * 1024
    (tmp_path / "proc/self/cgroup").write_text("0::/elsewhere\n")
    assert oom_kills(tmp_path) is None

"""What a set of processes has used (`TreeSample`), and the one sampler that reads it
(`TreeMeter`) in the scopes of the trial's sweep (its loader's workers) and the diagnosing loop
(the process tree): both count the same children, which burn a known CPU time and hold a known
resident set."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Event, Semaphore
from pathlib import Path

import pytest

from advisor.measure.hardware.host import (
    child_pids,
    helper_processes,
    process_tree,
    process_usage,
)
from advisor.measure.hardware.processes import ProcessReading, TreeMeter, TreeSample

CHILDREN = 3
HOLD_MIB = 48
BURN_S = 0.4
MIB = 2**20


@dataclass(frozen=True)
class Cues:
    """What the test and its children tell each other (forked: shared as they are)."""

    hold: Event  # the test has read the children bare: hold the memory
    held: Semaphore  # one release per child holding it
    go: Event  # the windows are open: burn
    burnt: Semaphore  # one release per child done burning
    end: Event  # the windows' last readings are taken: free the memory and exit

    @classmethod
    def make(cls) -> Cues:
        fork = multiprocessing.get_context("fork")
        return cls(fork.Event(), fork.Semaphore(0), fork.Event(), fork.Semaphore(0), fork.Event())


def _burn(cues: Cues) -> None:
    """Hold HOLD_MIB MiB written (so resident; writing it costs some 60 ms of CPU, before the
    windows), then burn BURN_S s of this process's CPU, and keep the memory until the end."""
    cues.hold.wait(30)
    held = bytearray(b"\x01") * (HOLD_MIB * MIB)
    cues.held.release()
    cues.go.wait(30)
    started = time.thread_time()
    while time.thread_time() - started < BURN_S:
        pass
    cues.burnt.release()
    cues.end.wait(30)
    del held


def _from_each_child(said: Semaphore) -> None:
    for _ in range(CHILDREN):
        assert said.acquire(timeout=30)


def test_the_trial_and_the_loop_count_the_same_children_alike() -> None:
    """The one sampler in the two scopes its loops give it: the trial's (the children that
    predate its loader left out) and the diagnosing loop's (the whole tree, helpers left out)
    both count the children, their CPU between two readings and their memory."""
    cues = Cues.make()
    before = child_pids()  # as the trial takes them before it makes a loader
    own = os.getpid()
    fork = multiprocessing.get_context("fork")
    children = [fork.Process(target=_burn, args=(cues,)) for _ in range(CHILDREN)]
    for child in children:
        child.start()
    try:
        trial = TreeMeter(leave_out=frozenset(before))
        bare = trial.start().without(own)
        cues.hold.set()
        _from_each_child(cues.held)
        loop = TreeMeter()
        loop.start()
        at_start = trial.read().without(own)
        cues.go.set()
        _from_each_child(cues.burnt)
        at_end = trial.read().without(own)
        loop.read()
        # the children end inside the loop's window: it keeps the CPU they were last seen
        # with, at the reading just before their end
        cues.end.set()
        for child in children:
            child.join(10)
        ended = loop.read()
    finally:
        cues.end.set()
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(5)
    workers = {child.pid for child in children}
    assert set(at_end.processes) == workers
    # the trial: the workers' CPU between two readings, and the largest worker's memory
    sweep_cpu = at_end.cpu_since(at_start)
    assert CHILDREN * (BURN_S - 0.02) <= sweep_cpu <= CHILDREN * BURN_S + 0.15
    for pid in workers:  # each holds what it wrote on top of what it was born with
        grew = at_end.processes[pid].rss_bytes - bare.processes[pid].rss_bytes
        assert grew >= HOLD_MIB * MIB
    assert trial.peak_child_rss_bytes >= bare.largest_rss_bytes + HOLD_MIB * MIB
    assert at_end.total_rss_bytes >= CHILDREN * HOLD_MIB * MIB
    # the loop: the same children in its tree, ended, at the CPU the trial counted for them
    for pid in workers:
        assert ended.processes[pid].rss_bytes == 0
        assert ended.processes[pid].cpu_s >= at_end.processes[pid].cpu_s
    loop_workers_cpu = TreeSample({p: ended.processes[p] for p in workers}).cpu_since(loop.first)
    assert abs(loop_workers_cpu - sweep_cpu) <= 0.1
    assert loop.cpu_s >= sweep_cpu - 0.02  # the tree: the workers and this process
    assert loop.peak_rss_bytes >= at_end.total_rss_bytes


def test_a_process_that_ends_keeps_its_last_cpu_and_holds_no_memory() -> None:
    start = TreeSample({1: ProcessReading(1.0, 100), 2: ProcessReading(5.0, 300)})
    later = TreeSample({1: ProcessReading(1.5, 120), 3: ProcessReading(0.25, 50)})
    chained = start.then(later)
    assert chained.processes == {
        1: ProcessReading(1.5, 120),
        2: ProcessReading(5.0, 0),  # ended: its last CPU, no memory
        3: ProcessReading(0.25, 50),  # born since: counted from zero
    }
    assert chained.cpu_since(start) == 0.75
    assert later.cpu_since(start) == 0.75  # unchained, the ended one adds nothing either way
    assert chained.total_rss_bytes == 170 and chained.largest_rss_bytes == 120
    # a reading never takes CPU back (a later reading that is lower keeps the earlier one)
    assert later.then(TreeSample({1: ProcessReading(1.0, 90)})).processes[1].cpu_s == 1.5
    assert TreeSample().largest_rss_bytes == 0


def test_process_usage_reads_stat_and_statm_and_none_when_gone(tmp_path: Path) -> None:
    proc = tmp_path / "proc" / "7"
    proc.mkdir(parents=True)
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S", "1"] + ["0"] * 9 + [str(3 * ticks), str(ticks)]  # state ... utime stime
    (proc / "stat").write_text(f"7 (a b) c) {' '.join(fields)} 0 0\n")
    (proc / "statm").write_text("1000 250 10 1 0 100 0\n")
    assert process_usage(7, root=tmp_path) == (4.0, 250 * os.sysconf("SC_PAGE_SIZE"))
    (proc / "statm").unlink()  # a reading between the two files: its memory reads 0
    assert process_usage(7, root=tmp_path) == (4.0, 0)
    assert process_usage(8, root=tmp_path) is None
    assert TreeSample.read([7, 8], root=tmp_path).processes == {7: ProcessReading(4.0, 0)}


def _read_while(meter: TreeMeter, wait: Callable[[], None]) -> None:
    """Read the tree every 50 ms while `wait` runs, as a loop reads it at its batches."""
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (wait(), done.set()))
    waiter.start()
    while not done.wait(0.05):
        meter.read()
    waiter.join()
    meter.read()


def _spin(seconds: float) -> None:
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass


@pytest.mark.timing
def test_the_loop_leaves_out_a_server_its_process_started_and_counts_its_workers() -> None:
    """In a notebook's kernel the demo's SeaweedFS is a child of the process whose loader is
    diagnosed: its CPU serves the loader's requests but is not the loader's. A child running
    another program (`yes`, as busy as a core lets it) is left out of the loop's usage; a child
    of this interpreter (as a DataLoader worker is), as busy, is counted."""
    helper = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.1)
        assert helper.pid in helper_processes(os.getpid())  # beside any server the run started
        assert helper.pid not in process_tree(os.getpid(), leave_out=frozenset({helper.pid}))
        alone = TreeMeter()
        alone.start()
        _read_while(alone, lambda: time.sleep(0.6))
        worker = multiprocessing.get_context("fork").Process(target=_spin, args=(0.6,))
        worker.start()
        with_worker = TreeMeter()
        with_worker.start()
        _read_while(with_worker, lambda: worker.join(30))
    finally:
        helper.kill()
        helper.wait(5)
    # the test's own thread sleeps: the tree's CPU is the helper's, or nothing
    assert alone.cpu_s < 0.1, alone.cpu_s
    assert with_worker.cpu_s > 0.3, with_worker.cpu_s

"""The one instrumented loop (`InstrumentedLoop`), driven as the diagnosing loop, `watch` and the
trial's slices drive it: waits, steps and samples per step, and the training thread's CPU split
between taking the batches and the steps."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator

import pytest

from advisor.measure.hardware.processes import READ_PERIOD_S, TreeMeter, TreeSample
from advisor.measure.loop.instrument import InstrumentedLoop

BATCHES = 12
LOAD_CPU_S = 0.01  # the loader's CPU per batch, on the training thread (0 workers)
STEP_CPU_S = 0.02  # a spinning step's CPU per batch
OWN_CPU_S = 0.005  # the driver's own work on a batch before its step


def _spin(seconds: float) -> None:
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass


def _loader() -> Iterator[list[int]]:
    for index in range(BATCHES + 1):
        _spin(LOAD_CPU_S)
        yield [index] * 4


@pytest.mark.timing
@pytest.mark.parametrize("announced", [True, False], ids=["stepping", "from-arrival"])
def test_marks_split_the_threads_cpu_between_loading_and_the_steps(announced: bool) -> None:
    """The trial announces its step (`stepping()`): its own work on the batch before it stays
    the loop's. `watch` cannot (the step is the user's code): the step runs from the arrival."""
    loop = InstrumentedLoop(len, gpu=False)
    loop.start()
    opened = closed = None
    for index, batch in enumerate(_loader()):
        loop.arrived(batch)
        if index == 0:
            opened = loop.mark()
        elif index == BATCHES:
            closed = loop.mark(tree=False)
            break
        _spin(OWN_CPU_S)
        if announced:
            loop.stepping()
        _spin(STEP_CPU_S)
        loop.stepped()
    loop.stop()
    assert opened is not None and closed is not None and opened.tree is not None
    assert closed.tree is None
    # from the first batch's arrival to the last's: BATCHES loads, the driver's own work and
    # BATCHES steps
    loading = BATCHES * (LOAD_CPU_S + (OWN_CPU_S if announced else 0.0))
    assert loading <= closed.loader_cpu_s(opened) <= loading + 0.015
    stepping = BATCHES * (STEP_CPU_S + (0.0 if announced else OWN_CPU_S))
    steps = closed.steps_cpu_s(opened)
    assert stepping <= steps <= stepping + 0.03
    run = loop.record("spun", "batches")
    assert run.first_batch_samples == 4 and run.samples == (4,) * (BATCHES - 1)
    assert len(run.wait_s) == len(run.step_s) == BATCHES - 1
    assert run.step_cpu_s is not None and run.step_cpu_s >= steps
    # the tree (this process) used at least the thread's CPU over the loop, to the clock tick
    # /proc counts a process's CPU in (each of the tree's two readings rounds down to one)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert run.cpu_s >= closed.thread_cpu_s - opened.thread_cpu_s - 2 * tick


@pytest.mark.timing
def test_the_tree_is_read_at_a_batchs_arrival_at_most_every_read_period() -> None:
    reads: list[float] = []

    class CountedMeter(TreeMeter):
        def read(self) -> TreeSample:
            reads.append(time.perf_counter())
            return super().read()

    loop = InstrumentedLoop(len, meter=CountedMeter(), gpu=False)
    loop.start()
    started = time.perf_counter()
    while time.perf_counter() - started < 4 * READ_PERIOD_S:
        loop.arrived([1])
        time.sleep(0.005)
        loop.stepped()
    loop.stop()
    at_arrivals = reads[1:-1]  # the start's and the stop's readings left out
    assert 3 <= len(at_arrivals) <= 5, reads
    gaps = [b - a for a, b in itertools.pairwise(at_arrivals)]
    # a reading is due a period after the arrival that took the last one (read just after it)
    assert all(gap >= READ_PERIOD_S - 0.002 for gap in gaps), gaps
    run = loop.record("paced", "seconds")
    assert len(run.samples) > 20 and all(step >= 0.005 for step in run.step_s)


@pytest.mark.timing
def test_a_loop_started_again_keeps_the_trees_cpu_of_its_runs_and_not_between_them() -> None:
    """`watch` iterates one loop once per epoch: its steps add up over the epochs, and so must
    the tree's CPU (the loader's CPU per sample is the tree's less the steps', over all the
    samples), without the user's own work between the epochs."""
    loop = InstrumentedLoop(len, gpu=False)
    for _ in range(2):
        loop.start()
        for batch in _loader():
            loop.arrived(batch)
            loop.stepped()
        loop.stop()
        _spin(0.3)  # an evaluation between the epochs
    run = loop.record("two epochs", "epoch")
    assert len(run.wait_s) == 2 * (BATCHES + 1) - 1
    loading = 2 * (BATCHES + 1) * LOAD_CPU_S
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert loading - 4 * tick <= run.cpu_s <= loading + 0.1, run.cpu_s

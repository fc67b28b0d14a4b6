"""`measure_handover`: a batch's round trip through torch's worker pickling, in this process."""

from __future__ import annotations

import gc
import os

import pytest

from advisor.measure.loop.handover import measure_handover


def test_a_batch_without_tensors_has_no_hand_over() -> None:
    assert measure_handover(0) is None


@pytest.mark.timing
def test_the_hand_over_grows_with_the_tensors_and_leaves_no_descriptor_open() -> None:
    measure_handover(1)  # the sharing thread's start, and torch's first use, out of the count
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    one, many = measure_handover(1), measure_handover(100)
    assert one is not None and many is not None and many.tensors == 100
    # each tensor is its own segment and descriptor, asked for in turn
    assert many.take_s > 10 * one.take_s and many.send_s > one.send_s
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before + 2


def test_the_wait_for_a_ready_batch_is_timed_through_a_real_worker_that_then_ends() -> None:
    from advisor.measure.hardware.host import child_pids
    from advisor.measure.loop.handover import _taken_from_a_worker

    before = child_pids()
    took = _taken_from_a_worker(tensors=2, rounds=2)
    assert took is not None and 0 < took < 1.0
    gc.collect()
    assert not child_pids() - before, "the measuring worker outlived the measurement"

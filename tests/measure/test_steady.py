"""The steady-state window of a loader measurement, and the readers' read-ahead it accounts for."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from advisor.core.location import DatasetLocation
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.measure.trial.data import TrialData
from advisor.measure.trial.live import LiveLoader
from advisor.measure.trial.steady import SteadyWindow
from advisor.measure.trial.sweep import measure_slice
from native_loader.decoders import default_decoder

# time, samples[, produced in all, backlog] (samples)
Arrival = tuple[float, int] | tuple[float, int, float, float]


def _window_rate(
    arrivals: list[Arrival], seconds: float, warm: int = 0, workers: int = 0
) -> float | None:
    """Feed arrivals to a SteadyWindow started at 0 until it closes."""
    window = SteadyWindow(0.0, seconds, warm, min_samples=0, hard_stop=3 * seconds,
                          round_batches=max(workers, 1))  # fmt: skip
    for index, (now, samples, *stages) in enumerate(arrivals):
        window.arrival(index, now, samples, *stages)
        if window.closed:
            break
    return window.rate()


def test_steady_window_on_an_even_stream() -> None:
    arrivals: list[Arrival] = [(0.1 * (i + 1), 10) for i in range(100)]  # 100 samples/s
    rate = _window_rate(arrivals, seconds=3.0)
    assert rate == pytest.approx(100.0, rel=0.05)


def test_steady_window_does_not_end_on_a_burst() -> None:
    # 10 batches back to back every 2 s: 50 samples/s. The first burst comes at 0.5 s, the next
    # after the slice's end. A window that opened and closed on arrivals counted to a batch
    # count would hold the first few batches of the second burst alone (thousands of
    # samples/s); one whose ends follow times holds the gap before it too, however extended.
    arrivals = [(0.5 + 2.0 * burst + 0.001 * i, 10) for burst in range(6) for i in range(10)]
    window = SteadyWindow(0.0, 2.0, 0, min_samples=0, hard_stop=6.0)
    for index, (now, samples) in enumerate(arrivals):
        window.arrival(index, now, samples)
        if window.closed:
            break
    assert window.rate() == pytest.approx(50.0, rel=0.02)
    assert window.opens is not None and window.last_counted_at - window.opens >= 2.0 / 3


def test_steady_window_after_a_slow_first_batch_and_a_burst() -> None:
    # The first batch took longer than the slice; what was made meanwhile arrives back to back
    # (20 batches within 20 ms), then the stream runs at 100 samples/s.
    burst: list[Arrival] = [(3.0 + 0.001 * i, 10) for i in range(20)]
    steady: list[Arrival] = [(3.1 + 0.1 * i, 10) for i in range(1, 60)]
    rate = _window_rate(burst + steady, seconds=2.0)
    assert rate is not None and rate == pytest.approx(100.0, rel=0.1)


def test_steady_window_skips_the_batches_waiting_for_it() -> None:
    # 2 workers x prefetch 2: the first batch came early, the other workers' first batches
    # were made meanwhile and arrive back to back after the window was to open (at 1.13 s).
    first: list[Arrival] = [(0.2, 10)]
    ready: list[Arrival] = [(1.2 + 0.001 * i, 10) for i in range(3)]
    steady: list[Arrival] = [(1.2 + 0.1 * i, 10) for i in range(1, 60)]
    rate = _window_rate(first + ready + steady, seconds=3.0, warm=4)
    assert rate is not None and rate == pytest.approx(100.0, rel=0.05)
    assert _window_rate(first + ready + steady, seconds=3.0, warm=0) == pytest.approx(112, rel=0.02)


def test_steady_window_counts_a_drained_read_ahead_as_fetched_before_it() -> None:
    # Reading is the bottleneck (100 samples/s), and the readers held 300 samples fetched while
    # the loader sat idle: the transform drains them at 300/s (3 batches every 0.1 s while the
    # reads add one) for 1.5 s, then the stream runs at the readers' 100/s. Over a 3 s slice the
    # window (1-3 s) delivers 400 samples in 2 s; the backlog shrank by 100 in it.
    arrivals: list[Arrival] = []
    backlog = 300.0
    produced = 0.0
    for i in range(1, 31):
        t = 0.1 * i
        draining = t <= 1.5
        for k in range(3 if draining else 1):
            backlog = max(backlog - (20.0 if draining else 0.0) / 3, 0.0)
            produced += 10
            arrivals.append((t + 0.001 * k, 10, produced, backlog))
    inflated = _window_rate([a[:2] for a in arrivals], seconds=3.0)
    assert inflated is not None and inflated > 140  # the drain counted as made in the window
    rate = _window_rate(arrivals, seconds=3.0)
    assert rate == pytest.approx(100.0, rel=0.1)


def test_steady_window_counts_a_drained_prefetch_queue_as_produced_before_it() -> None:
    # The loader produces 100 samples/s against a consumer taking 120/s: the batches queued
    # while it sat idle go at the consumer's pace the whole slice, so 120/s arrive while the
    # processes produce 100/s.
    arrivals: list[Arrival] = [(i / 12, 10, 100.0 * i / 12, 0.0) for i in range(1, 40)]
    assert _window_rate([a[:2] for a in arrivals], seconds=3.0) == pytest.approx(120, rel=0.05)
    assert _window_rate(arrivals, seconds=3.0) == pytest.approx(100.0, rel=0.05)


def test_steady_window_does_not_wait_for_a_full_read_ahead_when_the_transform_bounds() -> None:
    # The transform is the bottleneck (100 samples/s): the readers' budgets stay full (800
    # samples) the whole slice, so nothing is drained and a short slice is steady.
    arrivals: list[Arrival] = [(0.1 * i, 10, 10.0 * i, 800.0) for i in range(1, 40)]
    assert _window_rate(arrivals, seconds=1.5) == pytest.approx(100.0, rel=0.05)


def test_steady_window_at_an_epochs_end_counts_what_it_delivered() -> None:
    # 100 samples/s delivered all along; the readers hold 150 samples ahead until the epoch's
    # last object is fetched at 1.5 s, then drain them to the epoch's end at 3 s. A window that
    # closes then saw the backlog shrink by 150 with nothing slow in it.
    arrivals = [(0.1 * i, 10, 10.0 * i, 150.0 if i <= 15 else 150.0 - 10 * (i - 15))
                for i in range(1, 31)]  # fmt: skip
    drained = _window_rate(arrivals, seconds=3.0)
    assert drained is not None and drained < 40  # the epoch's end read as a slow fetch
    window = SteadyWindow(0.0, 3.0, 0, min_samples=0, hard_stop=9.0)
    for index, (now, samples, produced, backlog) in enumerate(arrivals):
        # left of the epoch: 300 - 10 * (index + 1) samples, no more than the backlog from 1.5 s
        window.arrival(index, now, samples, produced, backlog, finishing=now > 1.5)
        if window.closed:
            break
    assert window.rate() == pytest.approx(100.0, rel=0.05)


def test_steady_window_holding_an_epochs_restart_counts_what_it_delivered() -> None:
    # The epoch ends at 2 s: the readers' 150 samples drain from 1.5 s, and the next epoch
    # refills them from empty, 50 by the window's close at 3 s. Delivered stays 100/s (the
    # restart's wait is in it); the backlog at the close is below the one at the open.
    def backlog(t: float) -> float:
        return 150.0 if t <= 1.5 else max(150.0 - 300 * (t - 1.5), 0.0) if t <= 2.0 else 50.0

    arrivals = [(0.1 * i, 10, 10.0 * i, backlog(0.1 * i)) for i in range(1, 31)]
    assert (_window_rate(arrivals, seconds=3.0) or 0) < 70  # the refill read as a slow fetch
    window = SteadyWindow(0.0, 3.0, 0, min_samples=0, hard_stop=9.0)
    for index, (now, samples, produced, held) in enumerate(arrivals):
        window.arrival(index, now, samples, produced, held, finishing=1.5 < now <= 2.0)
        if window.closed:
            break
    assert window.held_epoch_end and window.rate() == pytest.approx(100.0, rel=0.05)


def test_steady_window_ignores_a_read_ahead_that_refills() -> None:
    # A backlog that grows in the window was fetched faster than it is consumed: the rate is
    # the delivered one.
    arrivals: list[Arrival] = [(0.1 * i, 10, 10.0 * i, 5.0 * i) for i in range(1, 40)]
    assert _window_rate(arrivals, seconds=3.0) == pytest.approx(100.0, rel=0.05)


def test_steady_window_counts_whole_rounds_of_bursting_workers() -> None:
    # 8 workers started together: a batch from each within 70 ms, every 0.5 s (160 samples/s).
    # The window opens on a burst's first batch; the slice ends at 6.2 s, past the 6.0 s burst.
    # Counting arrivals up to that time takes part of the opening burst and all of the 6.0 s
    # one; whole rounds end at the 6.5 s burst.
    arrivals: list[Arrival] = [
        (0.5 + 0.5 * burst + 0.01 * i, 10) for burst in range(40) for i in range(8)
    ]
    rate = _window_rate(arrivals, seconds=6.2, warm=16, workers=8)
    assert rate == pytest.approx(160.0, rel=0.01)


def test_steady_window_too_few_batches_is_no_rate() -> None:
    arrivals: list[Arrival] = [(1.0, 10), (4.0, 10), (8.0, 10), (12.0, 10)]
    assert _window_rate(arrivals, seconds=3.0) is None


SPEC = DemoSpec(images=120, image_kb=(20, 40), classes=2, shard_mb=0.5, large_files=0)


@pytest.fixture(scope="module")
def images(s3_endpoint: S3Endpoint) -> TrialData:
    upload(s3_endpoint, "steady-demo", SPEC)
    location = DatasetLocation("s3://steady-demo/small-images/", endpoint_url=s3_endpoint.url)
    return TrialData.sample(location, "jpeg", default_decoder("jpeg"))


@pytest.mark.timeout(60)
def test_the_workers_publish_what_their_readers_hold_fetched_ahead(images: TrialData) -> None:
    live = LiveLoader(images, batch_size=4, workers=2, pin=False)
    try:
        assert live.stage_samples() == (0.0, 0.0)
        live.next_batch()
        time.sleep(1.0)  # idle: the readers fill their read-ahead
        produced, held = live.stage_samples()
        # each worker's reader queues 4 x its requests in flight, within its byte budget; a
        # worker has read at most a share of the 120 objects (cycled)
        assert 4 <= held <= 2 * 4 * images.config.max_inflight_requests, held
        # the first batch, and the two workers' prefetch (2 batches each) made while idle
        assert 4 <= produced <= 4 * 5, produced
    finally:
        live.close()


def _burn_8ms(sample: Any) -> int:
    end = time.thread_time() + 0.008
    while time.thread_time() < end:
        pass
    return len(memoryview(sample))


@pytest.mark.timing
@pytest.mark.timeout(60)
def test_a_short_slice_of_a_transform_bound_loader_is_steady(images: TrialData) -> None:
    """Workers whose transform is the bottleneck hold full read-aheads the whole slice; the
    window must not wait for them to drain (they never do), so a short slice is measured."""
    # 64 requests in flight: each reader queues 256 objects ahead, 2 s of its transform
    slow = dataclasses.replace(images, transform=_burn_8ms).with_inflight(64)
    live = LiveLoader(slow, batch_size=4, workers=2, pin=False)
    try:
        measure_slice(live, 1.0)  # start-up
        time.sleep(0.5)  # between slices the readers fill their budgets
        point = measure_slice(live, 1.5, max_seconds=2.25)
        assert point.steady, point
        # two workers at 8 ms a sample: at most 250 samples/s (fewer on a shared machine)
        assert 0 < point.samples_per_s <= 250 * 1.1, point
    finally:
        live.close()


@pytest.mark.timeout(60)
def test_a_live_loader_knows_when_it_is_finishing_an_epoch(images: TrialData) -> None:
    """The trial's loaders read epochs of the set's length; one whose buffers hold what is
    left of its epoch says so (`SteadyWindow` then counts what it delivers)."""
    epoch = dataclasses.replace(images, epoch_objects=len(images.objects))
    live = LiveLoader(epoch, batch_size=8, workers=0, pin=False)
    try:
        assert live.epoch_samples == len(images.objects)
        live.next_batch()
        assert not live.finishing_epoch(backlog=0.0)  # 112 left, none held
        assert live.finishing_epoch(backlog=len(images.objects))
        batches = len(images.objects) // 8
        for _ in range(batches - 1):
            live.next_batch()
        assert live.finishing_epoch(backlog=0.0)  # the epoch's last batch is the one it fills
        live.next_batch()  # the next epoch's first
        assert not live.finishing_epoch(backlog=0.0)
    finally:
        live.close()

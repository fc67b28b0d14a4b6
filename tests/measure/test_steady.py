"""The steady-state window of a loader measurement, and the stages it counts."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import pytest
import torch

from advisor.core.location import DatasetLocation
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.measure.trial.data import TrialData
from advisor.measure.trial.live import LiveLoader
from advisor.measure.trial.results import STEP_SLEEP, STEP_SPIN
from advisor.measure.trial.steady import EpochStarts, StageGauge, SteadyWindow
from advisor.measure.trial.sweep import measure_counts, measure_slice
from native_loader.decoders import default_decoder
from native_loader.loader import from_config
from native_loader.settings import LoaderConfig, LoaderSettings
from native_loader.tarwriter import build_tar

# time, samples[, produced in all] (samples)
Arrival = tuple[float, int] | tuple[float, int, float]


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


def test_steady_window_counts_a_drained_prefetch_queue_as_produced_before_it() -> None:
    # The loader produces 100 samples/s against a consumer taking 120/s: the batches queued
    # while it sat idle go at the consumer's pace the whole slice, so 120/s arrive while the
    # processes produce 100/s.
    arrivals: list[Arrival] = [(i / 12, 10, 100.0 * i / 12) for i in range(1, 40)]
    assert _window_rate([a[:2] for a in arrivals], seconds=3.0) == pytest.approx(120, rel=0.05)
    assert _window_rate(arrivals, seconds=3.0) == pytest.approx(100.0, rel=0.05)


def test_steady_window_at_an_epochs_end_counts_what_it_delivered() -> None:
    # 100 samples/s delivered all along from an epoch of 300; the processes keep 100 samples
    # ahead in the prefetch queue until they have made the epoch's last at 2 s, then the queue
    # drains to the epoch's end at 3 s. A window that closes then saw the processes make 100
    # samples in 2 s with nothing slow in it.
    arrivals: list[Arrival] = [(0.1 * i, 10, min(10.0 * i + 100, 300.0)) for i in range(1, 31)]
    drained = _window_rate(arrivals, seconds=3.0)
    assert drained is not None and drained < 60  # the epoch's end read as a slow stage
    window = SteadyWindow(0.0, 3.0, 0, min_samples=0, hard_stop=9.0)
    for index, (now, samples, produced) in enumerate(arrivals):
        # left of the epoch: 300 - 10 * (index + 1) samples, no more than the queue from 2 s
        window.arrival(index, now, samples, produced, finishing=now > 2.0)
        if window.closed:
            break
    assert window.rate() == pytest.approx(100.0, rel=0.05)


def test_steady_window_holding_an_epochs_restart_counts_what_it_delivered() -> None:
    # An epoch of 200 samples ends at 2 s: the processes made its last at 1.5 s (50 ahead), and
    # the next epoch's come at the consumer's pace, its queue not refilled by the window's close
    # at 3 s. Delivered stays 100/s (the restart's wait is in it); produced reads 75.
    def produced(i: int) -> float:
        return min(10.0 * i + 50, 200.0) if i <= 20 else 10.0 * i

    arrivals: list[Arrival] = [(0.1 * i, 10, produced(i)) for i in range(1, 31)]
    assert (_window_rate(arrivals, seconds=3.0) or 0) < 80  # the restart read as a slow stage
    window = SteadyWindow(0.0, 3.0, 0, min_samples=0, hard_stop=9.0)
    for index, (now, samples, made) in enumerate(arrivals):
        window.arrival(index, now, samples, made, finishing=1.5 < now <= 2.0)
        if window.closed:
            break
    assert window.held_epoch_end and window.rate() == pytest.approx(100.0, rel=0.05)


def test_steady_window_ignores_a_prefetch_queue_that_refills() -> None:
    # Processes that make more than is taken refill their queue: the rate is the delivered one.
    arrivals: list[Arrival] = [(0.1 * i, 10, 15.0 * i) for i in range(1, 40)]
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
def test_the_workers_publish_what_they_produced(images: TrialData) -> None:
    live = LiveLoader(images, batch_size=4, workers=2, pin=False)
    try:
        assert live.produced_samples() == 0.0
        live.next_batch()
        time.sleep(1.0)  # idle: the workers fill the prefetch queue
        produced = live.produced_samples()
        # the first batch, and the two workers' prefetch (2 batches each) made while idle
        assert 4 <= produced <= 4 * 5, produced
    finally:
        live.close()


class _SlowStart(torch.utils.data.IterableDataset[int]):
    """An epoch whose first item comes after 50 ms asleep (a wait: the reads) and 100 ms of the
    thread's own CPU (its work, which the CPU per item holds)."""

    def __iter__(self) -> Any:
        time.sleep(0.05)
        end = time.thread_time() + 0.1
        while time.thread_time() < end:
            pass
        yield from range(4)


@pytest.mark.timing  # a process the machine keeps off its core waits: that counts, as it should
@pytest.mark.timeout(60)
def test_an_epochs_first_item_wait_is_counted_apart_from_its_cpu() -> None:
    """Each loader process counts the epochs it starts and what their first items kept it
    waiting, not working: in the training process (0 workers) and in forked workers."""
    gauge = StageGauge(2)
    dataset = gauge.publishing(_SlowStart())
    assert gauge.epoch_starts() == EpochStarts() and EpochStarts().mean_since(EpochStarts()) is None
    for _ in range(3):
        assert list(dataset) == [0, 1, 2, 3]
    starts = gauge.epoch_starts()
    assert starts.count == 3
    waited = starts.mean_since(EpochStarts())
    assert waited is not None and 0.045 <= waited < 0.12, starts  # with its CPU: 0.15 and more
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=None, num_workers=2, multiprocessing_context="fork"
    )
    assert sorted(loader) == sorted([0, 1, 2, 3] * 2)
    after = gauge.epoch_starts()
    assert after.count == 5  # one start in each worker
    waited = after.mean_since(starts)
    assert waited is not None and 0.045 <= waited < 0.12, after


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
    """The trial's loaders read epochs of the set's length; one whose processes have nothing
    left of its epoch to make says so (`SteadyWindow` then counts what it delivers)."""
    epoch = dataclasses.replace(images, epoch_objects=len(images.objects))
    live = LiveLoader(epoch, batch_size=8, workers=0, pin=False)
    try:
        assert live.epoch_samples == len(images.objects)
        live.next_batch()
        assert not live.finishing_epoch()  # 112 left
        batches = len(images.objects) // 8
        for _ in range(batches - 3):
            live.next_batch()
        assert not live.finishing_epoch()  # 16 left: two batches to make
        live.next_batch()
        assert live.finishing_epoch()  # the epoch's last batch is the one it fills
        live.next_batch()
        live.next_batch()  # the next epoch's first
        assert not live.finishing_epoch()
    finally:
        live.close()


# Streamed tar shards whose epoch the readers' read-ahead holds whole, as the bench's tar scenario
# (issue 56): 24 shards of 50 samples of 20 kB, 1,200 samples an epoch, 4 s at the consumer's
# 300 samples/s; a batch of 16 and 32 requests, 256 MiB in flight, as the trial reads them.
SHARDS, SHARD_SAMPLES, CONSUMER, BATCH = 24, 50, 300.0, 16


def _payload_size(sample: dict[str, Any]) -> torch.Tensor:
    """A transform that costs ~nothing: the loader, not the transform, is measured."""
    return torch.tensor(len(sample["bin"]))


@pytest.fixture
def streamed_shards(s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str) -> TrialData:
    for shard in range(SHARDS):
        members = [(f"{shard:03d}{i:03d}.bin", os.urandom(20_000)) for i in range(SHARD_SAMPLES)]
        key = f"shards/shard-{shard:03d}.tar"
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=build_tar(members))
    location = DatasetLocation(f"s3://{s3_bucket}/shards/", endpoint_url=s3_endpoint.url)
    data = TrialData.sample(location, "tar", _payload_size)
    return dataclasses.replace(data, epoch_objects=SHARDS).with_inflight(32, 256 * 2**20)


def _spinning_loop_rate(data: TrialData, seconds: float) -> float:
    """Samples/s a training loop sees from the exported module's loader at 0 workers
    (`from_config`, as `make_dataloader(num_workers=0)` builds it) with a spinning step of
    batch / consumer seconds: a busy loop of its own, not the trial's `spin_step`."""
    uri = data.objects[0].uri.rpartition("/")[0] + "/"
    config = LoaderConfig(
        uri=uri, endpoint_url=data.config.endpoint_url, region=None, profile=None,
        tar_samples=True, data_format="tar", transform=None,
        loader=LoaderSettings(batch_size=BATCH, num_workers=0), shuffle=False, seed=0,
        data_source="stream", sagemaker_input_mode=None, shard_size_bytes=None,
        max_inflight_requests=data.config.max_inflight_requests,
        max_inflight_bytes=data.config.max_inflight_bytes, cache_dir=None, cache_max_bytes=None,
    )  # fmt: skip
    loader = from_config(config, transform=_payload_size)
    started = time.perf_counter()
    opened: float | None = None
    counted = 0
    for batch in loader:  # one epoch is 4 s at the consumer's rate: the loop ends within it
        now = time.perf_counter()
        if opened is None and now - started >= 0.5:  # past the first batch's start-up
            opened = now
        elif opened is not None:
            counted += len(batch)
            if now - opened >= seconds:
                return counted / (now - opened)
        end = now + len(batch) / CONSUMER
        while time.perf_counter() < end:
            pass
    raise AssertionError("the epoch ended before the loop's window did")


@pytest.mark.timing
@pytest.mark.timeout(90)
def test_a_spinning_slice_on_streamed_shards_reads_what_a_spinning_loop_does(
    streamed_shards: TrialData,
) -> None:
    """The trial's 0-worker slice with a spinning step reads what a training loop spinning over
    the exported loader reads (issue 56: 74-106 samples/s where the loop read 309). Its first
    slice blocks, the second spins, both in the first epoch, whose length the loader learns only
    at its end: the readers had requested all of it, and their reservations shrank with every
    shard taken."""
    before = _spinning_loop_rate(streamed_shards, 2.0)
    points, _ = measure_counts(
        streamed_shards, BATCH, [0], CONSUMER, slice_seconds=1.5, max_slice_seconds=3.0,
        slices_per_mode=1, modes=(STEP_SLEEP, STEP_SPIN),
    )  # fmt: skip
    after = _spinning_loop_rate(streamed_shards, 2.0)
    spinning = next(p for p in points if p.step == STEP_SPIN)
    low, high = min(before, after), max(before, after)
    slices = [(p.step, round(p.samples_per_s)) for p in points]
    rates = f"slices {slices}, the loop {before:.0f} and {after:.0f} samples/s"
    assert spinning.steady, rates
    assert 0.8 * low <= spinning.samples_per_s <= 1.2 * high, rates

"""The live trial on real data over real HTTP: bounded, cancellable, JSON-serializable."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.core.location import DatasetLocation
from advisor.core.reader_budget import INFLIGHT_MAX
from advisor.core.workload import Workload
from advisor.decide.recommend import recommend
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.measure.hardware import probe_hardware
from advisor.measure.hardware.host import child_pids
from advisor.measure.profile import profile_dataset
from advisor.measure.trial.data import TrialData, TrialEvent
from advisor.measure.trial.live import spin_step
from advisor.measure.trial.probe_results import StorageProbe, saturated
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_LOCAL_COPY,
    LoaderPoint,
    TrialSetup,
    summarise,
)
from advisor.measure.trial.run import _lower_bound_note, run_trial
from advisor.measure.trial.sweep import measure_loader
from native_loader import ReaderConfig, S3Reader
from native_loader.decoders import default_decoder
from tests.measure.conftest import located_profile

SPEC = DemoSpec(images=80, image_kb=(20, 40), classes=2, shard_mb=0.5, large_files=1, large_mb=2)


@pytest.fixture(scope="module")
def demo(s3_endpoint: S3Endpoint) -> str:
    bucket = "trial-demo"
    upload(s3_endpoint, bucket, SPEC)
    return bucket


def test_saturation_rule() -> None:
    assert not saturated([10, 20])
    assert not saturated([10, 20, 40])
    assert saturated([10, 20, 21, 20.5])
    assert not saturated([10, 10.5, 30])


@pytest.mark.timing
@pytest.mark.timeout(90)
@pytest.mark.parametrize("layout", ["small-images", "shards"])
def test_trial_measures_everything_within_budget(
    s3_endpoint: S3Endpoint, demo: str, layout: str
) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/{layout}/")
    events: list[TrialEvent] = []
    started = time.monotonic()
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=8),  # type: ignore[arg-type]
        seconds=8, progress=events.append,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed <= 8 * 1.1, elapsed  # the budget bounds it, the workers' shutdown included
    assert result.storage is not None and result.storage.first_byte_p50_s > 0
    assert result.storage.concurrency_curve
    # the sweep read with Little's law's requests in flight for the measured latency
    assert result.requests_in_flight is not None and 32 <= result.requests_in_flight <= INFLIGHT_MAX
    # ... and the reader's default byte budget: it holds hundreds of the demo's small objects
    assert result.inflight_bytes == ReaderConfig().max_inflight_bytes
    assert result.decode is not None and result.decode.cpu_s_per_sample > 0
    if layout == "small-images":  # the decoder's output: an RGB image, 3 bytes a pixel
        decoded = result.decode.output_bytes_per_sample
        assert decoded is not None and decoded > result.decode.bytes_per_sample
        assert result.gpu_decode is None
        assert "GPU decode not measured: no CUDA device" in result.notes
    workers = [p.num_workers for p in result.sweep]
    # 8 s on 2 cores hold two counts at first: 0 and the model's choice, interleaved
    assert workers[0] == 0 and workers[1] in (1, 2) and workers[2:4] == workers[:2]
    assert all(p.samples_per_s > 0 and p.samples > 0 for p in result.sweep)
    # the main thread's loading work per sample: some CPU, never more than a sample's wall time
    zero = result.sweep[0]
    assert zero.steady and zero.main_cpu_s_per_sample is not None
    assert 0 < zero.main_cpu_s_per_sample <= 1.1 / zero.samples_per_s
    main = result.main_thread_s(0)
    # ... the median over the steady 0-worker slices, each within its own slice's wall time
    slowest = min(p.samples_per_s for p in result.sweep if p.num_workers == 0 and p.steady)
    assert main is not None and 0 < main <= 1.1 / slowest
    # the cores' busy CPU per sample holds the training thread's, and the reader's, the server's
    machine = result.machine_s(0)
    assert machine is not None and machine >= 0.9 * main, (machine, main)
    # the workers' own CPU per sample: measured with workers, within what the cores allow
    cores = len(os.sched_getaffinity(0))
    with_workers = [p for p in result.sweep if p.num_workers > 0 and p.steady]
    assert with_workers and all(p.worker_cpu_s_per_sample is not None for p in with_workers)
    assert all(
        0 < p.worker_cpu_s_per_sample <= 1.2 * cores / p.samples_per_s  # type: ignore[operator]
        for p in with_workers
    )
    assert all(p.worker_cpu_s_per_sample is None for p in result.sweep if p.num_workers == 0)
    # a worker's memory in bytes: a Python process with torch holds more than 16 MiB; none at 0
    assert all(p.peak_worker_rss_bytes >= 16 * 2**20 for p in with_workers)
    assert all(p.peak_worker_rss_bytes == 0 for p in result.sweep if p.num_workers == 0), [
        (p.num_workers, p.peak_worker_rss_bytes) for p in result.sweep
    ]
    assert not any(p.pin_memory for p in result.sweep)  # no CUDA here
    assert any(p.point is not None for p in events) and events[-1].phase == "done"
    assert json.loads(json.dumps(dataclasses.asdict(result)))["uri"] == location.uri


@pytest.mark.timing
@pytest.mark.timeout(90)
def test_trial_measures_what_training_sees_within_budget(
    s3_endpoint: S3Endpoint, demo: str
) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    before = child_pids()
    started = time.monotonic()
    events: list[TrialEvent] = []
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=8, consumer_rate=200.0),  # type: ignore[arg-type]
        seconds=10, progress=events.append,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed <= 10 * 1.1 and result.seconds_used <= 10 * 1.1, elapsed
    assert not child_pids() - before, "DataLoader workers or the spinning step left running"
    counts = {c.num_workers: c for c in result.counts}
    assert 0 in counts and 1 in counts
    for count in counts.values():
        steps = [p.step for p in result.sweep if p.num_workers == count.num_workers]
        # interleaved slices, both step models, at least two slices per count
        assert set(steps) == {"sleep", "spin"} and len(steps) >= 2
        assert count.low <= count.median <= count.high
        # with a step of 8 / 200 s per batch, training never sees more than the consumer
        assert 0 < count.median <= 200.0 * 1.05
    order = [p.num_workers for p in result.sweep]
    assert order[: len(counts)] == sorted(counts)  # one slice per count, then the next round
    # every steady slice measures the training thread's CPU per sample (a spin's left out) and
    # its share of a core (the spin in it): spinning for the step holds more of the core
    steady = [p for p in result.sweep if p.steady]
    assert steady and all(
        p.main_cpu_s_per_sample is not None and p.training_share is not None for p in steady
    )
    spin = [p.training_share or 0.0 for p in steady if p.step == "spin"]
    sleep = [p.training_share or 0.0 for p in steady if p.step == "sleep"]
    assert spin and sleep and max(spin) > max(sleep), (spin, sleep)
    assert all(0 < share <= 1.05 for share in spin + sleep)
    # the loaders' epochs are the set's: its end and the next one's start are measured too
    epochs = f"in epochs of {profile.object_count} objects as training's"  # type: ignore[attr-defined]
    assert any(e.phase == "sweep" and epochs in e.message for e in events), events


def _slice(workers: int, rate: float, step: str, steady: bool = True) -> LoaderPoint:
    return LoaderPoint(
        workers, False, None, 100, 1.0, rate, 0.0, 0.1, 0.0, steady=steady, step=step
    )


def test_a_count_has_a_median_and_a_range_per_step_model() -> None:
    points = [
        _slice(0, 1000.0, "sleep"), _slice(0, 600.0, "spin"), _slice(0, 1020.0, "sleep"),
        _slice(0, 640.0, "spin"), _slice(1, 900.0, "sleep"), _slice(1, 50.0, "spin", False),
        _slice(1, 905.0, "spin"),
    ]  # fmt: skip
    zero, one = summarise(points)
    assert (zero.median, zero.low, zero.high, zero.step) == (620.0, 600.0, 640.0, "spin")
    sleep = zero.at("sleep")
    assert sleep is not None and (sleep.median, sleep.noise) == (1010.0, 10.0)
    assert zero.slower.noise == 20.0 and not zero.lower_bound and zero.slices == 4
    # a step model's lower bound is left out where a steady slice of it exists
    spin = one.at("spin")
    assert spin is not None and (spin.median, spin.slices, spin.lower_bound) == (905.0, 2, False)
    assert (one.median, one.step) == (900.0, "sleep")
    (only,) = summarise([_slice(2, 40.0, "none", False), _slice(2, 60.0, "none", False)])
    assert only.lower_bound and only.median == 50.0


@pytest.mark.timing
def test_the_spinning_step_keeps_its_thread_busy_and_releases_the_gil() -> None:
    """CUDA's spin-wait keeps the training thread on its core with the GIL released: other
    threads run meanwhile, even where a thread holding the GIL would hand it over only after a
    second's switch interval."""
    progress = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            progress[0] += 1
            time.sleep(0.001)

    # what a thread that never leaves its core gets of it on this machine now (the baseline:
    # a shared machine gives any thread less than a whole core)
    wall, cpu = time.monotonic(), time.thread_time()
    while time.monotonic() - wall < 0.2:
        pass
    core_share = (time.thread_time() - cpu) / (time.monotonic() - wall)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    counter = threading.Thread(target=count)
    try:
        counter.start()
        time.sleep(0.05)
        before_cpu, before = time.thread_time(), progress[0]
        started = time.monotonic()
        spin_step(0.5)
        elapsed = time.monotonic() - started
        busy, counted = time.thread_time() - before_cpu, progress[0] - before
    finally:
        stop.set()
        counter.join()
        sys.setswitchinterval(switch)
    assert 0.5 <= elapsed < 0.75, elapsed
    # the step holds its core most of the time a busy thread gets here, as a driver's
    # spin-wait does (a loop of time.sleep(0) parks the thread for the timer slack on every
    # turn: about a quarter of it), and the other thread ran
    assert busy >= 0.6 * core_share * elapsed, (busy, elapsed, core_share)
    assert counted >= 20, counted


@pytest.mark.timing
@pytest.mark.timeout(60)
def test_cancel_returns_promptly_and_leaves_no_workers(s3_endpoint: S3Endpoint, demo: str) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    cancel = threading.Event()

    def on_event(event: TrialEvent) -> None:
        if event.phase == "sweep":
            cancel.set()

    before = child_pids()
    started = time.monotonic()
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=4),  # type: ignore[arg-type]
        seconds=60, progress=on_event, cancel=cancel,
    )  # fmt: skip
    assert result.cancelled
    assert time.monotonic() - started < 30
    assert result.storage is not None
    deadline = time.monotonic() + 10
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "DataLoader workers left running"


@pytest.mark.timeout(60)
def test_a_slice_too_short_for_a_steady_state_is_a_marked_lower_bound(
    s3_endpoint: S3Endpoint, demo: str
) -> None:
    location, _ = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    data = TrialData.sample(location, "jpeg", default_decoder("jpeg"))
    # a steady window must hold 10,000 samples: 1 s cannot, so the rate is start-up included.
    # The window opens a third of the slice after the first batch: 0.3 s held no round after
    # it where the first batch came late on a loaded machine (2 batches, no costs)
    point = measure_loader(data, 8, 0, False, 1.0, max_seconds=1.0, min_samples=10_000)
    assert not point.steady
    # the costs per sample need no steady rate: the rounds the window counted hold them
    assert point.main_cpu_s_per_sample is not None and point.main_cpu_s_per_sample > 0
    assert point.samples > 0 and point.samples_per_s == pytest.approx(
        point.samples / point.seconds, rel=0.01
    )
    note = _lower_bound_note(point.num_workers, point.samples_per_s, seconds=5.0)
    assert note.startswith("num_workers=0 reached no steady state within its share of the 5 s")
    assert "only a lower bound" in note and "longer trial (e.g. 30 s)" in note
    assert "e.g. 120 s" in _lower_bound_note(0, point.samples_per_s, seconds=60.0)


def test_bad_budget_and_transform(s3_endpoint: S3Endpoint, demo: str) -> None:
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/large/")
    hardware = probe_hardware()
    with pytest.raises(ValueError, match="seconds"):
        run_trial(location, profile, hardware, Workload(), seconds=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot import"):
        run_trial(
            location, profile, hardware, Workload(transform="no_such_module_x:fn"),  # type: ignore[arg-type]
            seconds=5,
        )  # fmt: skip
    assert os.cpu_count()


@pytest.mark.timing
@pytest.mark.slow
def test_a_trial_on_text_shards_batches_objects_by_their_lines(tmp_path: object) -> None:
    """One text object holds thousands of samples (lines): a batch of 512 samples is one object,
    not 512 objects (a batch of 512 x 150 MB shards never arrived within any budget)."""
    from pathlib import Path

    folder = Path(str(tmp_path))
    line = b'{"text": "' + b"x" * 200 + b'"}\n'
    for i in range(4):
        (folder / f"shard-{i}.jsonl").write_bytes(line * 5000)  # ~1 MB, 5,000 samples each
    location = DatasetLocation(str(folder))
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    assert profile.dominant_format == "jsonl"
    started = time.monotonic()
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=512, consumer_rate=20_000.0),  # type: ignore[arg-type]
        seconds=8,
    )  # fmt: skip
    assert time.monotonic() - started <= 8 * 1.1
    assert result.counts, result.notes
    per_object = 5000
    for count in result.counts:
        # samples/s counts lines: far more than the few objects/s a 1 MB read-and-parse allows
        assert count.median > 2 * per_object / 8, count
    assert result.decode is not None
    # the decode cost is per line, not per 5,000-line object
    assert result.decode.bytes_per_sample == pytest.approx(len(line), rel=0.2)


def test_no_count_above_the_objects_an_epoch_deals_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two text shards whose records wait 2 ms each (a transform that sleeps, so that workers
    scale past this machine's cores), on a rank said to have 8 cores: a third worker would be
    dealt no shard, so the count search measures no count above 2, and NW-3 chooses 2 at most.
    """
    (tmp_path / "sleepy.py").write_text(
        "import time\n\ndef wait(record):\n    time.sleep(0.002)\n    return len(record)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "data"
    data.mkdir()
    line = b'{"text": "' + b"x" * 200 + b'"}\n'
    for i in range(2):
        (data / f"shard-{i}.jsonl").write_bytes(line * 200)
    location = DatasetLocation(str(data))
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    hardware = dataclasses.replace(probe_hardware(), usable_cores=8, affinity_cores=8)
    workload = Workload(batch_size=16, consumer_rate=None, transform="sleepy:wait")
    result = run_trial(location, profile, hardware, workload, seconds=14)  # type: ignore[arg-type]
    measured = {c.num_workers: round(c.median) for c in result.counts}
    assert measured and max(measured) <= 2, measured
    assert recommend(profile, hardware, workload, result).num_workers <= 2


def test_items_per_batch() -> None:
    data = TrialData((), ReaderConfig(), "text", default_decoder("text"), samples_per_item=5000.0)
    assert data.items_per_batch(512) == 1
    assert dataclasses.replace(data, samples_per_item=1.0).items_per_batch(512) == 512
    assert dataclasses.replace(data, samples_per_item=100.0).items_per_batch(512) == 5


def test_trial_data_with_records_streams_one_record_per_sample(tmp_path: Path) -> None:
    """Text shards read as records: one item is one line (samples_per_item 1), and the data
    counts as streamed (its byte budget is the one for streams)."""
    from native_loader import ObjectInfo

    shard = tmp_path / "part-0.txt"
    shard.write_text("".join(f"line {n}\n" for n in range(100)))
    info = ObjectInfo(str(shard), shard.name, shard.stat().st_size, "")
    data = TrialData((info,), ReaderConfig(), "text", str, records="lines")
    assert data.streamed and data.items_per_batch(64) == 64
    assert list(data.dataset(str)) == [f"line {n}" for n in range(100)]
    whole = dataclasses.replace(data, records=None, fmt="npy")
    assert not whole.streamed


def test_a_loader_cycles_the_sample_to_trainings_epoch_and_no_further(tmp_path: Path) -> None:
    """The sweep's loaders cycle a small sample so that a slice is not cut short, but an
    epoch of theirs ends where training's does: a 5-object set read from a 3-object sample
    ends its epoch after 5 objects, as the set's own loader would."""
    from native_loader import ObjectInfo

    objects = []
    for n in range(3):
        path = tmp_path / f"{n}.bin"
        path.write_bytes(bytes([n]) * 10)
        objects.append(ObjectInfo(str(path), path.name, 10, ""))
    data = TrialData(tuple(objects), ReaderConfig(), "bin", lambda b: bytes(memoryview(b))[0])
    assert list(data.dataset(data.transform, min_objects=20)) == [0, 1, 2] * 6 + [0, 1]
    epoch = dataclasses.replace(data, epoch_objects=5)
    assert list(epoch.dataset(epoch.transform, min_objects=20)) == [0, 1, 2, 0, 1]
    assert list(epoch.dataset(epoch.transform)) == [0, 1, 2]  # no cycling asked for


def test_only_a_saturated_concurrency_curve_is_a_storage_ceiling() -> None:
    rising = StorageProbe(
        5, 5_000_000, 0.02, 0.03, 1.0, ((1, 1.0, 50), (8, 7.5, 375), (32, 19.0, 950))
    )
    assert not rising.saturated and rising.aggregate_mb_s is None  # a lower bound, not a ceiling
    flat = StorageProbe(5, 5_000_000, 0.02, 0.03, 1.0, ((8, 300, 1), (16, 320, 1), (32, 310, 1)))
    assert flat.saturated and flat.aggregate_mb_s == 320


@pytest.mark.timeout(90)
def test_trial_sweeps_the_local_copy_training_reads(
    s3_endpoint: S3Endpoint, demo: str, tmp_path: Path
) -> None:
    """With the first epoch streaming and the later ones reading the cache, the trial copies a
    sample into a scratch folder (in the progress, removed afterwards) and sweeps both; the
    steady state is the local copy's, and the setup records it."""
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    events: list[TrialEvent] = []
    workload = Workload(batch_size=8, epochs=3)
    hardware = probe_hardware()
    result = run_trial(
        location, profile, hardware, workload, seconds=12, progress=events.append,  # type: ignore[arg-type]
        read_paths=(READ_LISTED, READ_LOCAL_COPY), scratch_dir=tmp_path,
    )  # fmt: skip
    assert any(e.phase == "copy" and "copied" in e.message for e in events)
    assert list(tmp_path.iterdir()) == []  # the scratch copy is gone
    assert result.setup == TrialSetup.of(workload, hardware.usable_cores, READ_LOCAL_COPY)
    assert result.counts and result.first_epoch is not None
    assert result.first_epoch.read_path == READ_LISTED and result.first_epoch.counts
    # the loaders read the copy at local-disk speed: far above the endpoint's (the demo server
    # adds first-byte latency), with no consumer to bound them
    assert result.best_count() is not None


@pytest.mark.timeout(90)
def test_the_model_of_a_local_copy_is_fed_by_the_copys_own_probe(
    s3_endpoint: S3Endpoint, demo: str, tmp_path: Path
) -> None:
    """A copy-local trial probes its copy as well: its files answer far sooner than the endpoint,
    and the model, fed with that probe (not the endpoint's, nor a default disk read one file at
    a time, which predicted 15% of the rate), predicts about what the sweep measured on the copy
    at the chosen count. It still over-predicts one process handing over thousands of tiny
    samples a second (its threads taking turns, which no CPU figure counts: +30-40% on an idle
    machine, docs/benchmarks.md), hence the wide upper bound."""
    from advisor.decide.recommend import recommend

    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    hardware = probe_hardware()
    workload = Workload(batch_size=8, transform="bench.transforms:raw")  # reading dominates
    result = run_trial(
        location, profile, hardware, workload, seconds=10,  # type: ignore[arg-type]
        read_paths=(READ_LOCAL_COPY,), scratch_dir=tmp_path,
    )  # fmt: skip
    assert result.setup is not None and result.setup.read_path == READ_LOCAL_COPY
    assert result.storage is not None and result.copy_storage is not None
    assert result.copy_storage.first_byte_p50_s < result.storage.first_byte_p50_s
    # the copy itself is timed (the reads and the writes): the copy-local's time comes from it
    copied = result.sample_copy
    assert copied is not None and copied.objects >= 4 and copied.bytes > 0 < copied.seconds
    rec = recommend(profile, hardware, workload, result)  # type: ignore[arg-type]
    assert rec.data_source == "copy-local" and "NW-3" in rec.path()
    source = rec.decision("data_source")
    assert source.evidence["copy_rate"] == "measured", source.rationale
    assert "at the measured" in source.rationale and "the trial copied" in source.rationale
    table = rec.decision("num_workers").evidence["sweep_table"]
    assert rec.prediction_error is not None and -0.35 < rec.prediction_error < 0.6, table


def test_a_copy_with_no_room_says_so_and_reads_the_listed_objects(
    s3_endpoint: S3Endpoint, demo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.measure.trial import localcopy

    monkeypatch.setattr(localcopy, "COPY_QUOTA_BYTES", 10)  # no sampled object fits
    location, profile = located_profile(s3_endpoint, f"s3://{demo}/small-images/")
    result = run_trial(
        location, profile, probe_hardware(), Workload(batch_size=8), seconds=6,  # type: ignore[arg-type]
        read_paths=(READ_LOCAL_COPY,), scratch_dir=tmp_path,
    )  # fmt: skip
    assert result.setup is not None and result.setup.read_path == READ_LISTED
    assert any("could not make the local copy" in n and "quota" in n for n in result.notes)
    assert result.copy_storage is None and result.sample_copy is None
    assert list(tmp_path.iterdir()) == []

"""The trial on a packed sample: what training reads after a reshard-first (SRC-3). The sample
is packed into tar shards in a scratch folder, bounded and removed afterwards, swept as tar
samples through the runtime's DataLoader factory, and decides num_workers (NW-3) where training
reads the shards from local disk; where it cannot be made, the trial says so and the model
decides (NW-4)."""

from __future__ import annotations

import dataclasses
import json
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import read_paths, recommend
from advisor.decide.rules import Context, evaluate
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.export import build_export
from advisor.measure.hardware import probe_hardware
from advisor.measure.profile import DatasetProfile
from advisor.measure.trial import localcopy, packed
from advisor.measure.trial.data import TrialClock, TrialData, TrialEvent
from advisor.measure.trial.probe_results import DecodeCost, StorageProbe
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_PACKED,
    LoaderPoint,
    TrialResult,
    TrialSetup,
    summarise,
)
from advisor.measure.trial.run import run_trial
from advisor.report.headline import headline_lines
from advisor.report.recommendation import recommendation_summary
from native_loader import S3Reader
from native_loader.decoders import on_payload
from tests.builders import hardware as _hardware
from tests.builders import s3_profile
from tests.measure.conftest import located_profile

SPEC = DemoSpec(images=60, image_kb=(10, 20), classes=2, shard_mb=0.5, large_files=1, large_mb=1)
MANY = 500_000  # SRC-3: at least 100,000 objects under 1 MB


@pytest.fixture(scope="module")
def demo(s3_endpoint: S3Endpoint) -> str:
    bucket = "packed-trial-demo"
    upload(s3_endpoint, bucket, SPEC)
    return bucket


def _many_small(endpoint: S3Endpoint, bucket: str) -> tuple[DatasetLocation, DatasetProfile]:
    """The demo's small images, seen as the 500,000-object set they stand for: SRC-3 advises
    packing them, while the trial reads the few dozen real ones."""
    location, profile = located_profile(endpoint, f"s3://{bucket}/small-images/")
    return location, dataclasses.replace(profile, object_count=MANY)


def test_a_packed_sample_is_bounded_named_as_the_reshard_names_it_and_read_as_tar_samples(
    s3_endpoint: S3Endpoint, demo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location, _ = _many_small(s3_endpoint, demo)
    data = TrialData.sample(location, "jpeg", lambda b: bytes(memoryview(b)))
    data = dataclasses.replace(data, epoch_objects=30)  # an epoch of training: 30 objects
    monkeypatch.setattr(packed, "ENOUGH_OBJECTS", 10)  # the sample's bound
    events: list[TrialEvent] = []
    clock = TrialClock(10, threading.Event(), events.append)
    shards = packed.pack_sample(data, location.prefix_uri(), tmp_path, clock, 5.0)
    assert shards.fmt == "tar" and shards.config.endpoint_url is None
    assert len(shards.objects) == packed.PACKED_SHARDS
    # 10 objects in 4 shards: training's epoch of 30 objects is 12 such shards
    assert shards.epoch_objects == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == [o.key for o in shards.objects]
    names = []
    for shard in shards.objects:
        with tarfile.open(shard.uri) as tar:
            names += tar.getnames()
    # one object is one sample, named by its key below the listed prefix and its extension
    expected = [o.uri.removeprefix(location.prefix_uri()) for o in data.objects[:10]]
    assert names == expected and all(n.startswith("class_") for n in names)
    assert any(e.phase == "copy" and "packed 10 objects" in e.message for e in events)
    # read as training reads packed shards: tar samples, the transform on each one's payload
    with S3Reader(location.reader_config()) as reader:
        originals = [bytes(memoryview(r)) for r in reader.read_many(data.objects[:10])]
    assert list(shards.dataset(shards.transform)) == originals
    raw = list(shards.dataset())
    assert all(set(s) == {"__key__", "jpg"} for s in raw)
    assert [on_payload(len)(s) for s in raw] == [len(o) for o in originals]


def test_a_packed_sample_stays_within_the_disk_quota(
    s3_endpoint: S3Endpoint, demo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location, _ = _many_small(s3_endpoint, demo)
    data = TrialData.sample(location, "jpeg", len)
    monkeypatch.setattr(localcopy, "COPY_QUOTA_BYTES", 120_000)  # a handful of 10-20 KB images
    shards = packed.pack_sample(
        data, location.prefix_uri(), tmp_path, TrialClock(10, None, None), 5
    )
    written = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert 0 < len(list(shards.dataset())) < len(data.objects)
    # each shard pads to whole 10 KiB records: the quota bounds the members, at most one record
    # more per shard
    assert written <= 120_000 + packed.PACKED_SHARDS * tarfile.RECORDSIZE


def _spy_on_loaders(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The datasets the sweep's DataLoaders were built over (by its live loaders)."""
    from advisor.measure.trial import live

    datasets: list[Any] = []
    factory = live.make_dataloader

    def spy(dataset: Any, *args: Any, **kwargs: Any) -> Any:
        datasets.append(dataset.dataset)  # inside the StageGauge's publishing wrapper
        return factory(dataset, *args, **kwargs)

    monkeypatch.setattr(live, "make_dataloader", spy)
    return datasets


@pytest.mark.timeout(120)
def test_a_reshard_first_set_is_decided_by_the_sweep_on_its_packed_sample(
    s3_endpoint: S3Endpoint, demo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several epochs over a set that fits the disk: after packing, training reads the shards
    from local disk (SRC-6 copy-local). The trial packs a sample in its scratch folder (in the
    progress, removed afterwards), sweeps it as tar samples (a transform of bytes applied to
    each payload), and NW-3 decides from it; the card, the JSON and the export agree."""
    location, profile = _many_small(s3_endpoint, demo)
    hardware = probe_hardware()
    workload = Workload(batch_size=8, epochs=3, transform="bench.transforms:raw")
    assert read_paths(profile, hardware, workload) == (READ_PACKED,)
    datasets = _spy_on_loaders(monkeypatch)
    events: list[TrialEvent] = []
    result = run_trial(
        location, profile, hardware, workload, seconds=10, progress=events.append,
        read_paths=(READ_PACKED,), scratch_dir=tmp_path,
    )  # fmt: skip
    assert any(e.phase == "copy" and "tar shard" in e.message for e in events)
    assert list(tmp_path.iterdir()) == []  # the scratch folder is gone
    assert result.setup == TrialSetup.of(workload, hardware.usable_cores, READ_PACKED)
    assert result.counts and result.copy_storage is not None, result.notes
    # every loader the sweep measured read tar samples of the packed shards, nothing else
    assert datasets and all(d.tar_samples for d in datasets)
    assert all(
        u.endswith(".tar") and u.startswith(str(tmp_path)) for d in datasets for u in d.uris()
    )

    rec = recommend(profile, hardware, workload, result)
    assert rec.data_source == "reshard-first" and rec.after_reshard == "copy-local"
    assert "NW-3" in rec.path() and "NW-4" not in rec.path()
    nw = rec.decision("num_workers")
    assert nw.evidence["read_path"] == READ_PACKED and "packed sample" in nw.rationale
    measured = {c.num_workers: c.median for c in result.counts}
    assert rec.measured_samples_per_s == pytest.approx(measured[rec.num_workers], rel=1e-3)
    assert json.loads(rec.to_json())["num_workers"] == rec.num_workers
    assert "(measured)" in recommendation_summary(rec)
    module = " ".join(build_export(location, rec, workload, profile).module_source.split())
    assert "packed sample" in module and "pack it into tar shards first" in module


@pytest.mark.timeout(120)
@pytest.mark.parametrize("why", ["quota", "scratch"])
def test_a_sample_that_cannot_be_packed_is_named_and_the_model_decides(
    s3_endpoint: S3Endpoint,
    demo: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    why: str,
) -> None:
    location, profile = _many_small(s3_endpoint, demo)
    hardware = probe_hardware()
    workload = Workload(batch_size=8, epochs=3)
    scratch = tmp_path
    if why == "quota":
        monkeypatch.setattr(localcopy, "COPY_QUOTA_BYTES", 0)
    else:
        scratch = tmp_path / "no-such-folder"
    result = run_trial(
        location, profile, hardware, workload, seconds=6,
        read_paths=(READ_PACKED,), scratch_dir=scratch,
    )  # fmt: skip
    assert result.setup is not None and result.setup.read_path == READ_LISTED
    note = next(n for n in result.notes if "could not make the sample packed" in n)
    assert ("quota" in note) if why == "quota" else ("no-such-folder" in note)
    assert result.copy_storage is None and list(tmp_path.iterdir()) == []
    rec = recommend(profile, hardware, workload, result)
    assert "NW-4" in rec.path() and "NW-3" not in rec.path()
    assert rec.measured_samples_per_s is None
    rationale = rec.decision("num_workers").rationale
    assert "A prediction of the throughput model" in rationale
    assert "could not pack a sample" in rationale
    # the headline does not pass the listed objects' sweep off as what training will read
    headline = headline_lines(rec, result, 300.0)
    assert headline[1].startswith(f"Expected at num_workers={rec.num_workers}: ")
    assert "Measured" not in " ".join(headline)


# --- the rules, without a trial: which read path, and what the model takes -------------------


def _packed_trial(workload: Workload, cores: int) -> TrialResult:
    """A trial that swept a packed sample (the training thread's CPU measured per slice)."""
    sweep = tuple(
        LoaderPoint(w, False, 2 if w else None, 1000, 1000 / r, r, r * 0.05, 0.2, 300 * 2**20,
                    main, 0.9 / r)
        for w, r, main in ((0, 400.0, 2.4e-3), (1, 600.0, 4e-4), (2, 1100.0, 4e-4))
    )  # fmt: skip
    return TrialResult(
        "s3://bucket/train/", 30, 28,
        storage=StorageProbe(50, 2_500_000, 0.02, 0.04, 5.0, ((1, 5.0, 100), (8, 38.0, 760))),
        decode=DecodeCost("default", 200, 2e-3, 50_000, 2.2e-3),
        sweep=sweep, counts=summarise(sweep), setup=TrialSetup.of(workload, cores, READ_PACKED),
    )  # fmt: skip


def test_which_read_path_a_reshard_first_set_trials() -> None:
    hw = _hardware(4)
    small, epochs = s3_profile(MANY, 50_000), Workload(epochs=3)  # 25 GB: packed, then copied
    assert read_paths(small, hw, epochs) == (READ_PACKED,)
    ctx = Context(small, hw, epochs)
    assert ctx.reads.path(evaluate(ctx).state) == READ_PACKED
    once = Workload(epochs=1)  # one pass: the shards are streamed from S3, which the trial
    ctx = Context(small, hw, once)  # cannot make; it still packs a sample for its CPU costs
    assert ctx.reads.path(evaluate(ctx).state) is None and read_paths(small, hw, once) == (
        READ_PACKED,
    )
    # text records and tars are not packed one object a sample: the model decides, as before
    for fmt, records in (("tar", None), ("jsonl", "jsonl")):
        other = s3_profile(MANY, 50_000, fmt, records)
        assert read_paths(other, hw, epochs) == (READ_LISTED,)
        ctx = Context(other, hw, epochs)
        assert ctx.reads.path(evaluate(ctx).state) is None


def test_shards_streamed_from_s3_are_modelled_with_the_packed_samples_cpu() -> None:
    """One epoch: the shards stream from S3 after packing. NW-4 decides, saying so, with the
    training thread's CPU per sample measured on the packed sample, not the machine's (its
    readers read local files)."""
    hw, wl = _hardware(2), Workload(batch_size=16, epochs=1)
    small = s3_profile(MANY, 50_000)
    trial = _packed_trial(wl, 2)
    rec = recommend(small, hw, wl, trial)
    assert rec.data_source == "reshard-first" and rec.after_reshard == "stream"
    assert "NW-4" in rec.path() and rec.measured_samples_per_s is None
    assert "CPU per sample that the trial measured on a packed" in (
        rec.decision("num_workers").rationale
    )
    ctx = Context(small, hw, wl, trial)
    state = evaluate(ctx).state
    costs = ctx.costs(state, 0)
    assert costs.main_s == pytest.approx(2.4e-3)
    assert costs.machine_s is None and not ctx.reads.as_trialled(state)
    # the same trial, measured under another batch size, is not used at all
    other = Context(small, hw, dataclasses.replace(wl, batch_size=32), trial)
    other_state = evaluate(other).state
    assert other.costs(other_state, 0).main_s is None
    assert not other.reads.as_trialled(other_state) and not other.reads.packed_cpu_measured(
        other_state
    )


def test_the_export_says_what_a_tar_sample_is_and_that_the_set_is_to_be_packed() -> None:
    """The exported module's transform contract for tar samples is the trial's: a dict per
    sample, and a transform of one object's bytes applied to a packed sample's payload."""
    hw, wl = _hardware(4), Workload(epochs=3)
    location = DatasetLocation("s3://bucket/train/")
    shards = s3_profile(200, 150 * 10**6, "tar")
    module = build_export(location, recommend(shards, hw, wl), wl, shards).module_source
    assert '{"__key__": key, "<ext>": bytes, ...}' in module
    assert "native_loader.decoders.on_payload(transform)" in module
    small = s3_profile(MANY, 50_000)
    rec = recommend(small, hw, wl)
    assert rec.data_source == "reshard-first"
    module = " ".join(build_export(location, rec, wl, small).module_source.split())
    assert "pack it into tar shards first" in module and "on_payload" not in module

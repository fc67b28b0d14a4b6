"""recommend() end to end: the brief's scenarios, hard limits (Hypothesis), JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.core.units import rate
from advisor.core.workload import Workload
from advisor.decide.recommend import DATA_SOURCES, Recommendation, read_paths, recommend
from advisor.decide.rules import RULES, Context, DecisionKind, Key, evaluate, rule_by_id
from advisor.decide.rules.workers import core_cap
from advisor.decide.words import another_setup, stale_trial_note
from advisor.measure.trial.probe_results import DecodeCost, StorageProbe
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_LOCAL_COPY,
    LoaderPoint,
    ReadPathSweep,
    TrialResult,
    TrialSetup,
)
from advisor.report.headline import headline_lines
from advisor.report.recommendation import recommendation_summary
from tests.builders import hardware, make_hardware, make_profile, make_trial, profile, trial

MB, GB, TB = 10**6, 10**9, 10**12
RULE_IDS = [rule.id for rule in RULES]


SHARDS_30GB = profile(200, 150 * MB, "tar", 1000.0)
SMALL_FILES_2TB = profile(20_000_000, 100_000, "jpeg")


def test_no_gpu_means_no_pinned_memory() -> None:
    rec = recommend(SHARDS_30GB, hardware(gpus=0), Workload(consumer_rate=500))
    assert rec.pin_memory is False
    assert "PIN-1" in rec.path()
    assert "GPU" in rec.decision("pin_memory").rationale


def test_planned_gpu_pins_memory() -> None:
    planned = hardware(gpus=0).with_target_gpu("H100-SXM", 8)
    rec = recommend(SHARDS_30GB, planned, Workload(consumer_rate=500, gpus_per_node=8))
    assert rec.pin_memory is True and "PIN-4" in rec.path()
    assert any("planned" in n for n in rec.notes)


def test_many_small_files_and_2tb_reshard_or_shared_fs() -> None:
    rec = recommend(SMALL_FILES_2TB, hardware(), Workload(consumer_rate=1000))
    assert rec.data_source in ("reshard-first", "shared-fs")
    assert rec.data_source == "reshard-first" and rec.after_reshard == "stream"
    assert rec.sagemaker_input_mode == "FastFile"
    assert rec.shard_size_bytes == 150 * MB
    assert rec.decision("data_source").rules == ("SRC-3", "SRC-6")
    twenty_tb = profile(200_000_000, 100_000, "jpeg")
    assert recommend(twenty_tb, hardware(), Workload()).data_source == "shared-fs"


def test_30gb_of_150mb_shards_one_epoch_streams() -> None:
    # docs/decision-flow.md SRC-4: one pass over large shards gains nothing from a copy first
    rec = recommend(SHARDS_30GB, hardware(), Workload(consumer_rate=500, epochs=1))
    assert (rec.data_source, rec.sagemaker_input_mode, rec.cache_locally) == (
        "stream",
        "FastFile",
        False,
    )
    assert rec.decision("shard_size").value == 150 * MB  # already in the 50-200 MB window
    assert rec.decision("shard_size").rules == ("SHARD-0",)
    many = recommend(SHARDS_30GB, hardware(), Workload(consumer_rate=500, epochs=10))
    assert (many.data_source, many.sagemaker_input_mode) == ("copy-local", "File")
    assert any("copy" in n.lower() for n in many.cost_notes)


def test_the_kept_layout_comes_from_rules_with_ids() -> None:
    """No SHARD or PFX rule asks for a change: SHARD-0 and PFX-0 keep the layout, on the path."""
    rec = recommend(SHARDS_30GB, hardware(), Workload(consumer_rate=500))
    shard, prefixes = rec.decision("shard_size"), rec.decision("prefix_layout")
    assert (shard.value, shard.rules, shard.display) == (150 * MB, ("SHARD-0",), "143 MiB")
    assert shard.rationale.endswith("keep the layout.") and shard.confidence == "medium"
    assert (prefixes.value, prefixes.rules, rec.prefix_count) == (1, ("PFX-0",), 1)
    assert {"SHARD-0", "PFX-0"} <= set(rec.path())
    packed = recommend(SMALL_FILES_2TB, hardware(), Workload(consumer_rate=500))
    assert packed.decision("shard_size").rules == ("SHARD-2",)
    assert "SHARD-0" not in packed.path()


def test_decisions_follow_the_report_order_and_notes_come_from_flagged_rules() -> None:
    hw = dataclasses.replace(hardware(gpus=1), shm_bytes=MB)  # far too small for the batches
    rec = recommend(SHARDS_30GB, hw, Workload(consumer_rate=500))
    names = [d.name for d in rec.decisions]
    assert names == [k.value for k in DecisionKind if k.value in names]
    assert "SHM-1" in rec.path() and any("/dev/shm has" in n for n in rec.notes)
    assert [r.id for r in RULES if r.shown_in_notes] == ["SHM-1"]


def test_data_on_efs() -> None:
    rec = recommend(SHARDS_30GB, hardware(), Workload(data_location="efs"))
    assert (rec.data_source, rec.sagemaker_input_mode) == ("efs", "EFS")
    local_nfs = profile(1000, 5 * MB, uri="/mnt/efs/train")
    rec = recommend(local_nfs, hardware(), Workload(), data_fs="nfs4")
    assert rec.data_source == "efs" and rec.path()[0] == "SRC-1"
    # a local path on this machine's own file system is read in place
    rec = recommend(profile(1000, 5 * MB, uri="/tmp/train"), hardware(), Workload())
    assert rec.data_source == "copy-local" and rec.path()[0] == "SRC-2"


def test_trial_measurements_decide_and_model_is_reported() -> None:
    rates = {0: 150.0, 1: 180.0, 2: 350.0, 4: (685.0, 705.0), 8: (690.0, 710.0)}
    big = profile(2000, 150 * MB, "tar", 1000.0)  # 300 GB: streamed, as the trial read it
    rec = recommend(big, hardware(cores=16, gpus=1), Workload(consumer_rate=1000), trial(rates))
    # 1.2 x 1,000 is out of reach: the smallest within the measured noise (+-10) of 700
    assert rec.num_workers == 4
    nw = rec.decision("num_workers")
    # ... 8 workers lie within the noise of that choice: a repeated trial may choose them
    assert nw.measured and nw.confidence == "medium" and nw.rules == ("NW-3",)
    assert nw.evidence["within_noise_of"] == [8]
    # a choice no measured count comes near, with the counts around it measured, is firm
    clear = {**rates, 8: (600.0, 610.0)}
    firm = recommend(big, hardware(cores=16, gpus=1), Workload(consumer_rate=1000), trial(clear))
    nw_firm = firm.decision("num_workers")
    assert firm.num_workers == 4 and nw_firm.confidence == "high"
    assert nw_firm.evidence["within_noise_of"] == []
    # the model's error at the chosen count is NW-3's: what training sees, against the median
    ctx = Context(big, hardware(cores=16, gpus=1), Workload(consumer_rate=1000), trial(rates))
    trained = ctx.model(evaluate(ctx).state, 4).trained_samples_per_s
    assert rec.prediction_error == nw.evidence["prediction_error"] == round(trained / 695 - 1, 3)
    assert rec.measured_samples_per_s == 695.0 == rec.expected_samples_per_s
    assert rec.predicted_samples_per_s > 0
    assert rec.input_bound is True and "COST-3" in rec.path()
    assert rec.pin_memory is True and rec.decision("pin_memory").measured
    assert rec.decision("throughput").evidence["predicted_samples_per_s"] > 0


def test_without_trial_everything_is_a_prediction() -> None:
    rec = recommend(SHARDS_30GB, hardware(gpus=1), Workload(consumer_rate=500))
    nw = rec.decision("num_workers")
    assert not nw.measured and nw.confidence == "low"
    assert rec.measured_samples_per_s is None and rec.prediction_error is None
    # the expected rate is the prediction, to the 0.1 samples/s MEAS-2 rounds it to
    assert rec.expected_samples_per_s == pytest.approx(rec.predicted_samples_per_s, abs=0.05)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cores=st.integers(1, 64),
    gpus_per_node=st.sampled_from([1, 2, 4, 8]),
    ram_gb=st.one_of(st.none(), st.floats(0.0, 512.0)),
    size=st.sampled_from([10_000, 100_000, 5 * MB, 150 * MB, 1500 * MB]),
    count=st.sampled_from([10, 1000, 300_000]),
    consumer=st.one_of(st.none(), st.floats(1.0, 1e6)),
    epochs=st.integers(1, 20),
    gpus=st.integers(0, 1),
)
def test_workers_never_exceed_cores_nor_ram(
    cores: int,
    gpus_per_node: int,
    ram_gb: float | None,
    size: int,
    count: int,
    consumer: float | None,
    epochs: int,
    gpus: int,
) -> None:
    ram = None if ram_gb is None else int(ram_gb * GB)
    hw = hardware(cores=cores, ram_available=ram, gpus=gpus)
    wl = Workload(consumer_rate=consumer, epochs=epochs, gpus_per_node=gpus_per_node)
    rec = recommend(profile(count, size, "jpeg"), hw, wl)
    # never more workers than the cores per rank, a part-core counted whole (1.5 cores run 2
    # workers that share them; NW-1 takes the training thread's share of one off: its step's
    # duty cycle and the hand-over at the predicted rate, rounded up)
    assert 0 <= rec.num_workers <= math.ceil(cores / gpus_per_node)
    if ram is not None:
        assert rec.num_workers * 400 * MB <= ram / gpus_per_node
    assert (rec.prefetch_factor is None) == (rec.num_workers == 0)
    if rec.prefetch_factor is not None:  # 2..8, or less where /dev/shm holds no more (SHM-1)
        assert 1 <= rec.prefetch_factor <= 8
        assert rec.prefetch_factor >= 2 or "SHM-1" in rec.path()
    assert rec.data_source in DATA_SOURCES
    if gpus == 0:
        assert rec.pin_memory is False
    assert set(rec.path()) <= set(RULE_IDS)
    assert rec.path() == sorted(rec.path(), key=RULE_IDS.index)  # flow order
    json.loads(rec.to_json())


@settings(max_examples=150, deadline=None)
@given(
    size=st.floats(10e3, 200e6),
    latency=st.floats(0.0, 0.1),
    cpu=st.floats(0.0, 0.005),
    cores=st.sampled_from([1, 2, 4, 8, 9, 16, 64]),
    consumer=st.one_of(st.none(), st.floats(1.0, 1e6)),
)
def test_nw4_quality_bar(
    size: float, latency: float, cpu: float, cores: int, consumer: float | None
) -> None:
    """NW-4 reaches >= 90% of the best of {0,1,2,4,8} within the caps, or the consumer rate."""
    probe = StorageProbe(5, int(5 * size), latency, latency * 2, 90.0)
    result = TrialResult("s3://b/", 10, 10, storage=probe, decode=DecodeCost("d", 10, cpu, size))
    ctx = Context(
        profile(10_000, int(size)),
        hardware(cores=cores, ram_available=None),
        Workload(consumer_rate=consumer),
        result,
    )
    state: dict[Key, Any] = {Key.DATA_SOURCE: "stream"}
    finding = rule_by_id("NW-4").evaluate(ctx, state)
    assert finding is not None
    chosen = finding.value
    cap = core_cap(ctx, state)  # the cores the training thread's share of one leaves
    assert cap in (max(cores - 1, 0), cores)
    assert cap == max(math.ceil(cores - ctx.training_share(state, cores) - 1e-9), 0)
    best = max(ctx.model(state, w).samples_per_s for w in (0, 1, 2, 4, 8) if w <= cap)
    target = best if consumer is None else min(best, consumer)
    assert chosen <= cap
    assert ctx.model(state, chosen).samples_per_s >= 0.9 * target


def test_json_round_trip() -> None:
    rates = {0: 150.0, 2: 350.0, 4: 690.0}
    rec = recommend(
        SMALL_FILES_2TB, hardware(gpus=1), Workload(consumer_rate=1e5, epochs=3), trial(rates)
    )
    text = rec.to_json()
    data = json.loads(text)
    assert data["data_source"] == rec.data_source and data["fired_rules"] == rec.path()
    assert Recommendation.from_dict(data) == rec
    assert json.loads(Recommendation.from_dict(data).to_json()) == data


def test_dataloader_kwargs_are_accepted_by_torch() -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.zeros(4, 2))
    for cores in (1, 8):
        rec = recommend(SHARDS_30GB, hardware(cores=cores), Workload(consumer_rate=100))
        loader = DataLoader(data, batch_size=2, **rec.dataloader_kwargs())
        assert loader.num_workers == rec.num_workers


def test_summary_names_the_settings() -> None:
    rec = recommend(SHARDS_30GB, hardware(gpus=1), Workload(consumer_rate=500))
    text = recommendation_summary(rec)
    assert f"num_workers={rec.num_workers}" in text and "FastFile" in text
    for d in rec.decisions:
        assert d.name in text


def test_ranks_on_a_node_share_its_network() -> None:
    one = Context(SHARDS_30GB, hardware(cores=64), Workload())
    eight = Context(SHARDS_30GB, hardware(cores=64), Workload(gpus_per_node=8))
    assert one.storage_for("stream").aggregate_mb_s == 1250.0
    assert eight.storage_for("stream").aggregate_mb_s == 1250.0 / 8
    assert eight.storage_for("efs").aggregate_mb_s is None


def test_measured_sweep_is_reported_next_to_the_model() -> None:
    rates = {1: 180.0, 2: 350.0, 4: 690.0}
    big = profile(2000, 150 * MB, "tar", 1000.0)
    rec = recommend(big, hardware(cores=16), Workload(consumer_rate=400), trial(rates))
    table = rec.decision("throughput").evidence["sweep_samples_per_s"]
    assert set(table) == {"1", "2", "4"}
    assert table["4"]["measured"] == 690.0 and table["4"]["predicted"] > 0
    # trained from a local copy: the S3 sweep is still shown, as context
    small = recommend(SHARDS_30GB, hardware(), Workload(epochs=5), trial(rates))
    assert small.data_source == "copy-local" and small.measured_samples_per_s is None
    assert set(small.decision("throughput").evidence["sweep_samples_per_s"]) == {"1", "2", "4"}


@pytest.mark.parametrize("cores", [0, 1])
def test_zero_and_one_core_machines(cores: int) -> None:
    hw = dataclasses.replace(hardware(gpus=1), usable_cores=cores, affinity_cores=max(cores, 1))
    rec = recommend(SHARDS_30GB, hw, Workload(consumer_rate=100))
    assert rec.num_workers == 0 and rec.prefetch_factor is None
    assert rec.dataloader_kwargs() == {"num_workers": 0, "pin_memory": True}
    assert rec.expected_samples_per_s > 0
    assert recommend(SHARDS_30GB, hw, Workload(consumer_rate=100)) == rec  # deterministic


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("shard_size", 150_000_000, "143 MiB"),
        ("shard_size", 500_000, "488 KiB"),
        ("throughput", 1234.5, "1,234 samples/s"),
        ("prefix_layout", 1, "1 prefix"),
        ("prefix_layout", 4, "4 prefixes"),
        ("num_workers", 3, "3"),
        ("pin_memory", False, "False"),
        ("requests_in_flight", 96, "96 per process"),
        ("inflight_bytes", 256 * 2**20, "256 MiB per process"),
        ("cost", ["$0.40"], "see the notes"),
        ("throughput", None, "None"),
        ("not_a_decision", 3, "3"),
    ],
)
def test_decision_display_has_units(name: str, value: object, shown: str) -> None:
    from advisor.decide.recommend import Decision

    assert Decision(name, value, "why", ()).display == shown


def test_session_gives_recommend_the_local_file_system(tmp_path: Path) -> None:
    """recommend() reads nothing: the session looks up where a local data set lives."""
    from advisor.measure.hardware import filesystem_type
    from advisor.session import AdvisorSession

    for i in range(3):
        (tmp_path / f"part-{i}.bin").write_bytes(b"x" * 1000)
    session = AdvisorSession()
    session.set_location(str(tmp_path))
    rec = session.run_recommend()
    evidence = rec.decision("data_source").evidence
    assert evidence["filesystem"] == filesystem_type(str(tmp_path)) is not None


def test_a_probe_curve_still_rising_sets_no_bandwidth_ceiling() -> None:
    """The probe's best MB/s is the storage's ceiling only where more requests stopped adding:
    a curve still rising at its last level is a lower bound, and the prediction may exceed it."""
    shards = profile(200, 150 * MB, "tar", 1000.0)
    rising = trial({})  # 80 then 560 MB/s: rising at its last level
    flat = dataclasses.replace(
        rising,
        storage=dataclasses.replace(
            rising.storage,  # type: ignore[type-var]
            concurrency_curve=((8, 560.0, 3.7), (16, 565.0, 3.8), (32, 560.0, 3.7)),
        ),
    )
    workload = Workload(consumer_rate=50_000)
    capped = recommend(shards, hardware(cores=32, disk_free=0), workload, flat)
    free = recommend(shards, hardware(cores=32, disk_free=0), workload, rising)
    ceiling = 565 * MB / (150 * MB) * 1000  # samples/s the saturated curve lets through
    assert capped.predicted_samples_per_s <= ceiling * 1.001
    assert free.predicted_samples_per_s > ceiling


def _with_counts(result: TrialResult, **fields: Any) -> TrialResult:
    from advisor.measure.trial.results import summarise

    return dataclasses.replace(result, counts=summarise(result.sweep), **fields)


def test_a_copy_local_set_is_decided_by_the_trials_local_copy() -> None:
    """SRC-4 copies a small S3 set: a trial that swept a local copy decides num_workers
    (NW-3, measured); one that read S3 only leaves it to the model (NW-4), which says why."""
    small = profile(2000, 150_000, "jpeg")
    hw, wl = hardware(cores=4), Workload(batch_size=32)
    assert read_paths(small, hw, wl) == (READ_LOCAL_COPY,)
    rates = {0: 300.0, 1: 320.0, 2: 600.0, 3: 610.0, 4: 612.0}
    local = _with_counts(trial(rates), setup=TrialSetup.of(wl, 4, READ_LOCAL_COPY))
    rec = recommend(small, hw, wl, local)
    assert rec.data_source == "copy-local" and "NW-3" in rec.path()
    assert rec.measured_samples_per_s is not None
    assert "local copy" in rec.decision("num_workers").rationale
    listed = _with_counts(trial(rates), setup=TrialSetup.of(wl, 4, READ_LISTED))
    model = recommend(small, hw, wl, listed)
    assert "NW-4" in model.path() and model.measured_samples_per_s is None
    assert "could not measure that read path" in model.decision("num_workers").rationale


# What two trials measured on the bench's sets that fit the disk (`bench advisor-check`,
# fit-20KB-20ms-raw-fast and fit-8MB-0ms-raw-fast, 2 cores, 30 s): the S3 probe through the
# latency proxy, the probe of the local copy, the raw transform's cost, and the sweep on the copy
# per slice as (num_workers, samples/s, training thread's and machine's CPU us per sample).
LOCAL_COPY_TRIALS = {
    "20KB": (
        20_000,
        StorageProbe(
            1901, 38_020_000, 0.0221, 0.0260, 0.87,
            ((1, 0.8, 41), (2, 1.6, 82), (4, 2.9, 144), (8, 5.7, 283), (16, 12.8, 639),
             (32, 15.9, 795)),
        ),
        StorageProbe(
            12012, 240_240_000, 4.7e-6, 5.2e-6, 1289.0,
            ((1, 408, 20418), (2, 644, 32177), (4, 853, 42671)),
        ),
        DecodeCost("bench.transforms:raw", 64, 14.7e-6, 20_000, 29.1e-6),
        ((0, 9896, 64.5, 202.4), (1, 1892, 170.4, 1056.9), (2, 2604, 160.1, 765.6),
         (0, 11321, 59.6, 175.6), (1, 1682, 204.1, 1189.9), (2, 1749, 257.7, 1143.9)),
    ),
    "8MB": (
        8 * MB,
        StorageProbe(
            287, 2_296_000_000, 0.0076, 0.0446, 739.2,
            ((1, 494, 62), (2, 745, 93), (4, 517, 65), (8, 591, 74)),
        ),
        StorageProbe(
            492, 3_936_000_000, 7.0e-6, 9.5e-6, 14321.5,
            ((1, 11303, 1413), (2, 15016, 1877), (4, 14299, 1787)),
        ),
        DecodeCost("bench.transforms:raw", 40, 19.5e-6, 8 * MB, 45.7e-6),
        ((0, 2044, 75.6, 925.0), (1, 529, 268.0, 2857.1), (2, 784, 220.9, 2355.8),
         (0, 1470, 87.3, 1293.6), (1, 474, 316.2, 3205.4), (2, 665, 249.0, 2872.3)),
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("size", "objects", "epochs", "source"),
    [("20KB", 2000, 1, "copy-local"), ("8MB", 40, 1, "copy-local"), ("8MB", 15_000, 4, "stream")],
)
def test_the_model_of_a_local_copy_predicts_what_the_trial_measured_on_it(
    size: str, objects: int, epochs: int, source: str
) -> None:
    """Training reads a local copy (copy-local from S3, or the cache of a 120 GB stream's later
    epochs): the model takes the trial's probe of the copy (its first byte, bandwidth, the
    reader's local read-ahead), not S3's nor a default disk's, and its prediction at the chosen
    count lies within the range the trial measured there."""
    object_bytes, s3, copy, decode, slices = LOCAL_COPY_TRIALS[size]
    wl = Workload(batch_size=16, transform="bench.transforms:raw", epochs=epochs)
    hw = hardware(cores=2, disk_free=200 * GB)
    result = _with_counts(
        TrialResult(
            "s3://check/fit/", 30, 28, storage=s3, decode=decode,
            sweep=tuple(
                LoaderPoint(w, False, 2 if w else None, 1000, 1000 / r, r, r * object_bytes / MB,
                            0.1, 300 * 2**20, main * 1e-6, machine * 1e-6)
                for w, r, main, machine in slices
            ),
            setup=TrialSetup.of(wl, 2, READ_LOCAL_COPY), copy_storage=copy,
        )
    )  # fmt: skip
    rec = recommend(profile(objects, object_bytes, "binary"), hw, wl, result)
    assert rec.data_source == source and "NW-3" in rec.path()
    row = rec.decision("num_workers").evidence["sweep_table"][str(rec.num_workers)]
    assert row["low"] <= row["predicted"] <= row["high"], row
    assert rec.decision("throughput").evidence["predicted_samples_per_s"] == pytest.approx(
        row["predicted"], rel=0.01
    )


def test_a_cached_stream_measures_both_epochs_and_optimises_the_steady_state() -> None:
    big = profile(400, 300 * MB, "tar", 1000.0)  # 120 GB: streamed, and cached on 200 GB free
    hw, wl = hardware(cores=4, disk_free=200 * GB), Workload(batch_size=32, epochs=4)
    assert read_paths(big, hw, wl) == (READ_LISTED, READ_LOCAL_COPY)
    first = ReadPathSweep(READ_LISTED, counts=_with_counts(trial({1: 100.0, 2: 190.0})).counts)
    steady = _with_counts(
        trial({0: 500.0, 1: 900.0, 2: 910.0}),
        setup=TrialSetup.of(wl, 4, READ_LOCAL_COPY),
        first_epoch=first,
    )
    rec = recommend(big, hw, wl, steady)
    nw = rec.decision("num_workers")
    assert "NW-3" in nw.rules and nw.evidence["first_epoch_samples_per_s"] == {
        "1": 100.0,
        "2": 190.0,
    }
    assert "steady state" in nw.rationale and "first epoch streams" in nw.rationale


def test_a_trial_under_another_setup_is_not_used_and_says_so() -> None:
    wl = Workload(batch_size=32, consumer_rate=500.0)
    measured = _with_counts(
        trial({0: 200.0, 1: 400.0, 2: 480.0}), setup=TrialSetup.of(wl, 8, READ_LISTED)
    )
    changed = dataclasses.replace(wl, batch_size=64)
    rec = recommend(SHARDS_30GB, hardware(cores=8), changed, measured)
    assert "NW-3" not in rec.path() and rec.measured_samples_per_s is None
    assert any("batch_size 32 -> 64" in n for n in rec.notes)
    assert "another setup" in rec.decision("num_workers").rationale
    # one wording: the rule's reason, the note and the session's (below) say it alike
    assert another_setup(["batch_size 32 -> 64"]) in rec.decision("num_workers").rationale
    assert stale_trial_note(["batch_size 32 -> 64"], "are not used") in rec.notes


def test_the_session_drops_a_trial_whose_setup_changed() -> None:
    from advisor.session import AdvisorSession

    wl = Workload(batch_size=32, consumer_rate=500.0)
    session = AdvisorSession(workload=wl, hardware=hardware(cores=8), profile=SHARDS_30GB)
    session.trial = _with_counts(trial({0: 200.0, 1: 400.0}), setup=TrialSetup.of(wl, 8))
    session.set_workload(dataclasses.replace(wl, epochs=3))  # the sweep's setup is the same
    assert session.trial is not None and session.trial_dropped is None
    session.set_workload(dataclasses.replace(wl, consumer_rate=300.0))
    assert session.trial is None
    assert session.trial_dropped is not None and "consumer_rate 500.0 -> 300.0" in (
        session.trial_dropped
    )
    assert session.trial_dropped == stale_trial_note(
        ["consumer_rate 500.0 -> 300.0"], "were dropped"
    )
    rec = session.run_recommend()
    assert any("dropped" in n for n in rec.notes)


def test_dataloader_kwargs_are_the_factorys() -> None:
    from native_loader.loader import LoaderSettings

    rec = recommend(SHARDS_30GB, hardware(cores=8), Workload(consumer_rate=500))
    settings = LoaderSettings(1, rec.num_workers, rec.pin_memory, rec.prefetch_factor)
    expected = settings.dataloader_kwargs(cuda_available=True)
    del expected["batch_size"]
    assert rec.dataloader_kwargs() == expected


def test_the_wizard_forgets_the_points_of_a_dropped_trial() -> None:
    """Back to the workload step, a new consumer rate: the wizard's trial step shows no stale
    sweep, and the status says why the trial was dropped."""
    from advisor.session import AdvisorSession
    from advisor.wizard.controller import WizardController

    wl = Workload(batch_size=32, consumer_rate=500.0)
    session = AdvisorSession(workload=wl, hardware=hardware(cores=8), profile=SHARDS_30GB)
    session.trial = _with_counts(trial({0: 200.0, 1: 400.0}), setup=TrialSetup.of(wl, 8))
    controller = WizardController(session)
    controller.trial_step.points = list(session.trial.sweep)
    controller.workload_step.form.batch_size = "32"
    controller.workload_step.form.samples_per_s = "300"
    assert controller.apply_workload()
    assert session.trial is None and controller.trial_step.points == []
    assert "consumer_rate 500.0 -> 300.0" in controller.message


def test_a_local_folder_names_no_sagemaker_input() -> None:
    """SageMaker's input modes bring S3 data or a file system into a job: a folder already on
    local disk is read in place, and the summary says so instead of "SageMaker File"."""
    local = profile(2000, 150_000, "jpeg", uri="/data/images/")
    rec = recommend(local, hardware(), Workload(consumer_rate=500))
    assert (rec.data_source, rec.sagemaker_input_mode) == ("copy-local", None)
    line = next(x for x in recommendation_summary(rec).splitlines() if x.startswith("data source:"))
    assert line == "data source:  the folder, read in place"
    on_s3 = recommend(SHARDS_30GB, hardware(), Workload(consumer_rate=500, epochs=10))
    assert "data source:  copy-local (SageMaker File)" in recommendation_summary(on_s3)


def test_the_words_fit_the_data() -> None:
    """A folder gets no S3 words (requests in flight, shards, prefixes) and is read in place;
    a copy of an S3 set gets no shard size or key prefixes; the CLI's lines lead with the
    decision, not its rule ids."""
    local = recommend(profile(2000, 150_000, "jpeg", uri="/data/images/"), hardware(),
                      Workload(consumer_rate=500))  # fmt: skip
    text = recommendation_summary(local)
    assert local.reads_folder_in_place
    for s3_word in ("in flight", "inflight", "shard", "prefix", "no copy needed"):
        assert s3_word not in text, text
    assert "read in place" in local.decision("data_source").rationale
    shown = {d.name for d in local.shown_decisions()}
    assert "num_workers" in shown and not shown & {
        "shard_size",
        "prefix_layout",
        "requests_in_flight",
        "inflight_bytes",
    }
    copied = recommend(SHARDS_30GB, hardware(), Workload(consumer_rate=500, epochs=10))
    assert copied.data_source == "copy-local"
    assert not {d.name for d in copied.shown_decisions()} & {"shard_size", "prefix_layout"}
    assert "shards:" not in recommendation_summary(copied)
    for line in text.splitlines():
        assert not re.match(r"\S+ = .*\[(low|medium|high);", line), line


def test_a_blocking_step_is_predicted_beside_the_one_that_holds_its_core() -> None:
    """On 2 cores, loading at 4 ms of CPU a sample for a 3,000/s GPU: a step that holds its core
    (a CUDA sync that spins) leaves the loading less than one that blocks, so the recommendation
    predicts both, the holding one as its figure; with no consumer rate there is no step."""
    measured = make_trial({0: 240.0, 1: 250.0, 2: 420.0})
    tight = make_hardware(cores=2)
    rec = recommend(make_profile(), tight, Workload(consumer_rate=3000.0), measured)
    assert rec.predicted_blocking_samples_per_s is not None
    assert rec.predicted_blocking_samples_per_s > rec.predicted_samples_per_s * 1.02, rec
    loader_only = recommend(make_profile(), tight, Workload(), measured)
    assert loader_only.predicted_blocking_samples_per_s == loader_only.predicted_samples_per_s
    assert "predicted_blocking_samples_per_s" in json.loads(rec.to_json())


def test_a_plan_for_another_machine_names_the_rate_a_blocking_step_sees() -> None:
    measured = make_trial({0: 240.0, 1: 250.0, 2: 420.0})
    planned = make_hardware(cores=2, target={"cores": 2.0})
    rec = recommend(make_profile(), planned, Workload(consumer_rate=3000.0), measured)
    assert rec.predicted_blocking_samples_per_s is not None
    lines = headline_lines(rec, measured, 3000.0)
    expected = next(line for line in lines if line.startswith("Expected at num_workers="))
    assert "predicted for the training machine" in expected
    assert f"{rate(rec.predicted_blocking_samples_per_s)} where the training step waits" in expected

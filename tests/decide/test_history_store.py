"""The run history that lasts (`advisor.decide.history.store`): runs a real `python -m
advisor` process kept, listed, filtered and compared by a fresh one; no credential in the file;
writers in several processes at once; a database of another schema version, a corrupt one and
a locked one refused with what to do, while the trial itself stands."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from advisor.core.homecache import history_root
from advisor.core.units import per_s
from advisor.core.workload import Workload
from advisor.decide.history import (
    HistoryError,
    HistoryWarning,
    LoopRecord,
    RunStore,
    keep,
)
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.measure.loop.results import Spread
from advisor.session import AdvisorSession

SPEC = DemoSpec(images=30, image_kb=(10, 20), classes=3, shard_mb=0.2, large_files=1, large_mb=1)
SIGNATURE = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"  # a signed URL's, never to be written


def _advisor(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m advisor ARGV` in a process of its own, the test's environment (its HOME, and
    AWS credentials in the environment) passed on."""
    return subprocess.run(
        [sys.executable, "-m", "advisor", *argv],
        capture_output=True, text=True, timeout=100, check=False, env=dict(os.environ),
    )  # fmt: skip


def _loop(number: int = 0, dataset: str = "ImageFolder", median: float = 300.0) -> LoopRecord:
    return LoopRecord(
        number=number, at=time.time(), kind="watch", dataset=dataset, label="your loader",
        epoch=1, steps=100, samples_per_s=median, wait_share=0.4,
        windows_samples_per_s=Spread(median, median * 0.9, median * 1.1, 4),
        windows_wait_share=Spread(0.4, 0.35, 0.45, 4), verdict="the loader cannot keep up",
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_a_fresh_process_lists_filters_and_compares_an_earlier_process_runs(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    upload(s3_endpoint, s3_bucket, SPEC, layouts=("small-images", "shards"))
    images, shards = f"s3://{s3_bucket}/small-images/", f"s3://{s3_bucket}/shards/"
    common = ("--endpoint-url", s3_endpoint.url, "--seconds", "2", "--consumer-rate", "300")
    for uri in (images, images, shards):
        done = _advisor("recommend", uri, *common, "--quiet")
        assert done.returncode == 0, done.stderr
        assert "HistoryWarning" not in done.stderr

    listed = _advisor("history", "--json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)["runs"]
    assert [(r["number"], r["kind"], r["dataset"]) for r in runs] == [
        (1, "trial", images), (2, "trial", images), (3, "trial", shards),
    ]  # fmt: skip
    # each trial carries the answer made from it in its process
    assert all(r["num_workers"] is not None and r["data_source"] for r in runs)
    assert all(c["low"] <= c["median"] <= c["high"] for r in runs for c in r["counts"])

    text = _advisor("history", "--dataset", images)
    assert text.returncode == 0, text.stderr
    assert "the last 2 runs of " + images in text.stdout
    assert "#1 " in text.stdout and "#2 " in text.stdout and shards not in text.stdout
    assert "#2 repeats #1: the answer " in text.stdout

    compared = _advisor("history", "--compare", "1", "#2")
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert lines[0].startswith("#1 (trial, ") and lines[0].endswith(f"{images}):")
    assert lines[1].startswith("  the answer: ")
    stored = {c["num_workers"]: c for c in runs[0]["counts"]}
    for n, c in stored.items():  # each count's figure as stored, the first run's beside it
        line = next(x for x in lines if x.startswith(f"  num_workers={n}: "))
        assert line.endswith(("within the spread", "apart beyond the measured spread",
                              "measured in one run only")), line  # fmt: skip
        floor = ">=" if c["lower_bound"] else ""  # no steady state: at least this
        assert line.startswith(f"  num_workers={n}: {floor}{per_s(c['median'])}"), line
    assert _advisor("history", "--compare", "1", "9").returncode == 2

    # no credential of the environment in anything the history wrote
    written = b"".join(p.read_bytes() for p in history_root().iterdir())
    assert os.environ["AWS_SECRET_ACCESS_KEY"].encode() not in written
    assert os.environ["AWS_ACCESS_KEY_ID"].encode() not in written

    # listed and removed like the rest of the home cache; the next listing is empty
    cache = _advisor("cache")
    assert "history" in cache.stdout and "the run history: trials, recommendations" in cache.stdout
    removed = _advisor("cache", "--remove", "history")
    assert removed.returncode == 0, removed.stderr
    assert not history_root().exists()
    assert "no run kept yet" in _advisor("history").stdout


def test_a_signed_url_in_a_record_is_redacted_before_it_is_written() -> None:
    signed = f"https://host/o?X-Amz-Signature={SIGNATURE}&X-Amz-Credential=AKIAEXAMPLE/x"
    stored = RunStore().add(_loop(dataset=signed))
    written = b"".join(p.read_bytes() for p in history_root().iterdir())
    assert SIGNATURE.encode() not in written and b"AKIAEXAMPLE" not in written
    (loop,) = RunStore().load().loops
    assert loop.number == stored.number and "Signature=<redacted>" in loop.dataset


WRITER = textwrap.dedent("""
    import sys, time
    from advisor.decide.history import LoopRecord, RunStore
    from advisor.measure.loop.results import Spread
    start = float(sys.argv[2])
    while time.time() < start:  # every writer starts at once
        time.sleep(0.001)
    store = RunStore()
    for i in range(int(sys.argv[3])):
        store.add(LoopRecord(0, time.time(), "diagnose", sys.argv[1], "w", None, i, 1.0, 0.5,
                             Spread(1, 1, 1, 1), None, None))
""")


def test_writers_in_several_processes_at_once_each_keep_every_run() -> None:
    start, each, writers = time.time() + 1.5, 40, 4
    argv = [[sys.executable, "-c", WRITER, f"writer-{w}", str(start), str(each)]
            for w in range(writers)]  # fmt: skip
    procs = [subprocess.Popen(a, stderr=subprocess.PIPE, text=True) for a in argv]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    history = RunStore().load(last=None)
    assert [r.number for r in history.runs()] == list(range(1, writers * each + 1))
    for w in range(writers):
        assert [r.steps for r in RunStore().load(dataset=f"writer-{w}").loops] == list(range(each))


def test_a_writer_locked_out_beyond_the_timeout_warns_and_the_run_stands() -> None:
    store = RunStore(busy_timeout_s=0.2)
    store.add(_loop())
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write, not ending
    try:
        with pytest.warns(HistoryWarning, match="stayed locked by another process for more"):
            assert keep(_loop(), store) is None
        assert len(store.load()) == 1  # a reader is not kept waiting (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert keep(_loop(), store) is not None


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(100):
        (data / f"s{i:04d}.bin").write_bytes(random.Random(i).randbytes(20_000))
    return data


def _older_schema(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE schema_version (id INTEGER PRIMARY KEY, version INTEGER)")
        db.execute("INSERT INTO schema_version VALUES (1, 0)")
        db.execute("CREATE TABLE runs (n INTEGER, what TEXT)")
    db.close()


def _corrupt(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a database, whatever its name says " * 200)


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (_older_schema, "has schema version 0; this advisor reads version 1: remove it with "
                        "`python -m advisor cache --remove history`"),
        (_corrupt, "cannot be read or written (file is not a database): remove it with "
                   "`python -m advisor cache --remove history`"),
    ],
)  # fmt: skip
def test_a_history_of_another_version_or_corrupt_is_refused_and_the_trial_stands(
    folder: Path, spoil: object, said: str
) -> None:
    path = RunStore().path
    spoil(path)  # type: ignore[operator]
    with pytest.raises(HistoryError, match=said.replace("(", r"\(").replace(")", r"\)")):
        RunStore().load()
    listed = _advisor("history")
    assert listed.returncode == 1 and said in listed.stderr and "Traceback" not in listed.stderr
    session = AdvisorSession()
    session.set_location(str(folder))
    session.set_workload(Workload(consumer_rate=300, batch_size=16))
    with pytest.warns(HistoryWarning, match="this run is not in the history"):
        trial = session.run_trial(2)
    assert trial.counts and session.run_recommend().num_workers is not None
    (record,) = session.history().trials  # the session still has it, numbered by itself
    assert record.number == 1 and record.num_workers is not None


# A trial as schema version 1 wrote it (record_to_dict's JSON): the history keeps no sweep slice
# (`result` is null), so no memory figure of any unit is stored, and the row loads as written.
TRIAL_V1 = """{"number": 0, "at": 1764400000.0, "dataset": "s3://bucket/train/",
"consumer_rate": 400.0, "trial_seconds": 60, "seconds_used": 55.0,
"counts": [{"num_workers": 0, "median": 200.0, "low": 190.0, "high": 210.0, "lower_bound": false},
{"num_workers": 2, "median": 470.0, "low": 450.0, "high": 480.0, "lower_bound": true}],
"cancelled": false, "setup": {"batch_size": 32, "consumer_rate": 400.0, "gpus_per_node": 1,
"transform": null, "usable_cores": 2.0, "read_path": "listed"}, "num_workers": 2,
"data_source": "stream", "bottleneck": "storage", "bottleneck_within_noise": false,
"confidence": "high", "result": null}"""


def test_a_trial_kept_by_an_earlier_version_loads_with_its_figures(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    store.add(_loop())  # the database, made at this schema version
    with sqlite3.connect(store.path) as db:
        db.execute("INSERT INTO runs (kind, at, dataset, record) VALUES (?, ?, ?, ?)",
                   ("trial", 1764400000.0, "s3://bucket/train/", TRIAL_V1))  # fmt: skip
    (trial,) = store.load().trials
    assert trial.number == 2 and trial.result is None
    assert [(c.num_workers, c.median, c.lower_bound) for c in trial.counts] == [
        (0, 200.0, False), (2, 470.0, True),
    ]  # fmt: skip
    assert trial.setup is not None and trial.setup.usable_cores == 2.0
    assert trial.setup.read_path == "listed"
    assert (trial.num_workers, trial.data_source, trial.bottleneck) == (2, "stream", "storage")
    assert trial.inputs == ("s3://bucket/train/", 400.0, 60, trial.setup)

"""Text shards, advised end to end: the profile finds records, the trial measures records/s and
the time to the first batch, and the exported module yields the records, every one exactly once
across its workers (issue #32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import recommend
from advisor.demo.server import S3Endpoint
from advisor.export import SCHEMA_VERSION, build_export
from advisor.measure.hardware import probe_hardware
from advisor.measure.profile import profile_dataset
from advisor.measure.trial.run import run_trial
from native_loader import ReaderConfig, S3Reader
from tests.export_helpers import run_exported

SHARDS, LINES = 4, 3000


def _lines(shard: int) -> list[str]:
    return [f"shard {shard} line {n:05d} " + "x" * 40 for n in range(LINES)]


def _upload_text(client: object, bucket: str, fmt: str) -> list[str]:
    """SHARDS text shards of LINES lines under `fmt/`; the lines (JSON lines for jsonl)."""
    written = []
    for shard in range(SHARDS):
        lines = _lines(shard)
        if fmt == "jsonl":
            lines = [json.dumps({"shard": shard, "text": line}) for line in lines]
        body = ("\n".join(lines) + "\n").encode()
        suffix = "jsonl" if fmt == "jsonl" else "txt"
        client.put_object(Bucket=bucket, Key=f"{fmt}/part-{shard}.{suffix}", Body=body)  # type: ignore[attr-defined]
        written += lines
    return written


def _run_module(module_dir: Path, name: str, home: Path) -> list[list[object]]:
    """The exported module's batches with 2 workers, in a process that imports no advisor."""
    code = (
        "import json, sys\n"
        "sys.modules['advisor'] = None  # training needs only native_loader and torch\n"
        f"import {name}\n"
        f"loader = {name}.make_dataloader(num_workers=2, batch_size=64)\n"
        "print(json.dumps([list(batch) for batch in loader]))\n"
    )
    result = run_exported(module_dir / f"{name}.py", code=code, home=home)
    assert result.returncode == 0, result.stderr
    batches: list[list[object]] = json.loads(result.stdout.strip().splitlines()[-1])
    return batches


@pytest.mark.timeout(120)
def test_cli_exports_a_module_that_yields_every_line_once(
    capsys: pytest.CaptureFixture[str],
    s3_endpoint: S3Endpoint,
    s3_bucket: str,
    s3_client: object,
    tmp_path: Path,
) -> None:
    lines = _upload_text(s3_client, s3_bucket, "lines")
    module = tmp_path / "text_cfg.py"
    code = main([
        "recommend", f"s3://{s3_bucket}/lines/", "--endpoint-url", s3_endpoint.url,
        "--seconds", "6", "--batch-size", "64", "--export", str(module), "--json",
    ])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["profile"]["formats"][0]["records"] == "lines"
    assert result["recommendation"]["records"] == "lines"
    # the trial read records: a sample is a line, its batches 64 lines
    trial = result["trial"]
    assert any("read as records (lines)" in note for note in trial["notes"]), trial["notes"]
    assert trial["decode"]["bytes_per_sample"] == pytest.approx(len(lines[0]) + 1, rel=0.1)
    assert all(p["time_to_first_batch_s"] > 0 for p in trial["sweep"])
    config = json.loads(module.with_suffix(".json").read_text())
    assert config["records"] == "lines" and config["tar_samples"] is False
    assert config["schema_version"] == SCHEMA_VERSION
    assert "A batch is a list of `batch_size` records" in module.read_text()

    batches = _run_module(tmp_path, "text_cfg", tmp_path)
    assert all(isinstance(line, str) for batch in batches for line in batch)
    assert all(len(batch) <= 64 for batch in batches) and max(map(len, batches)) == 64
    got = [line for batch in batches for line in batch]
    assert sorted(got) == sorted(lines)  # every line exactly once across the 2 workers


@pytest.mark.timeout(120)
def test_the_trial_table_counts_records_and_shows_the_first_batch(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: object
) -> None:
    _upload_text(s3_client, s3_bucket, "table")
    code = main([
        "trial", f"s3://{s3_bucket}/table/", "--endpoint-url", s3_endpoint.url,
        "--seconds", "5", "--batch-size", "64",
    ])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("num_workers"))
    assert "records/s (median, spread)" in header and header.endswith("first batch")
    rows = out.split(header, 1)[1].strip().splitlines()
    assert rows and rows[0].split()[0] == "0" and rows[0].rstrip().endswith("s")  # ms or s


@pytest.mark.timeout(120)
def test_jsonl_shards_measure_records_per_second_and_export_parsed_records(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: object, tmp_path: Path
) -> None:
    records = [json.loads(line) for line in _upload_text(s3_client, s3_bucket, "jsonl")]
    location = DatasetLocation(f"s3://{s3_bucket}/jsonl/", endpoint_url=s3_endpoint.url)
    with S3Reader(location.reader_config()) as reader:
        profile = profile_dataset(location, reader)
    assert profile.record_format == "jsonl"
    hardware = probe_hardware()
    workload = Workload(batch_size=32)
    trial = run_trial(location, profile, hardware, workload, seconds=6)  # type: ignore[arg-type]
    assert trial.counts, trial.notes
    # records/s: far above the objects/s of SHARDS small shards read whole and decoded as items
    assert all(c.median > SHARDS * 10 for c in trial.counts), trial.counts
    # a streamed shard is never held whole: the reader's default budget
    assert trial.inflight_bytes == ReaderConfig().max_inflight_bytes
    first = trial.first_batch_s(trial.sweep[0].num_workers)
    assert first is not None and 0 < first < 6

    recommendation = recommend(profile, hardware, workload, trial)  # type: ignore[arg-type]
    throughput = recommendation.decision("throughput")
    assert throughput.evidence["streamed"] is True
    assert throughput.evidence["first_batch_s"] > 0
    bundle = build_export(location, recommendation, workload, profile)
    assert bundle.config.records == "jsonl" and bundle.config.shuffle_buffer > 0
    bundle.save(tmp_path, "jsonl_cfg")
    batches = _run_module(tmp_path, "jsonl_cfg", tmp_path)
    got = [record for batch in batches for record in batch]
    assert all(isinstance(record, dict) for record in got)
    key = json.dumps
    assert sorted(map(key, got)) == sorted(map(key, records))

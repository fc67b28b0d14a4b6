"""Closing the loop: `recommend` prints the reshard command it advises, the command packs the
data, the advisor profiles and measures the shards, and the export reads them."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.core.workload import Workload
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.reshard.advice import default_destination, reshard_command
from advisor.session import AdvisorSession
from tests.export_helpers import run_exported
from tests.reshard.conftest import environ

SPEC = DemoSpec(images=40, image_kb=(10, 20), classes=4, shard_mb=0.1, large_files=1, large_mb=1)


def test_reshard_command_is_quoted_and_sized() -> None:
    command = reshard_command("s3://b/my images/", 150_000_000, "http://127.0.0.1:9000")
    assert shlex.split(command) == [
        "python", "-m", "advisor", "reshard", "s3://b/my images/", "s3://b/my images-shards/",
        "--shard-size", "150MB", "--seed", "0", "--endpoint-url", "http://127.0.0.1:9000",
    ]  # fmt: skip
    assert default_destination("/data/train/") == "/data/train-shards"


@pytest.mark.parametrize(
    ("count", "size", "fmt", "advised"),
    [(500_000, 60_000, "jpeg", True), (2_000, 150_000_000, "tar", False)],
)
def test_recommend_prints_the_reshard_command_it_advises(
    capsys: pytest.CaptureFixture[str], count: int, size: int, fmt: str, advised: bool
) -> None:
    from advisor.cli import _print_recommendation
    from advisor.decide.recommend import recommend
    from advisor.measure.profile import DatasetProfile, FormatInfo, SizeStats

    uri = "s3://bucket/train/"
    session = AdvisorSession()
    session.set_location(uri, endpoint_url="http://127.0.0.1:9000")
    session.profile = DatasetProfile(
        uri=uri, storage="s3", object_count=count, total_bytes=count * size,
        sizes=SizeStats(size, size, size, size, size, float(size)),
        formats=(FormatInfo(fmt, 1000, 1000 * size, None),), distinct_prefixes=1,
        listed_objects=1000,
    )  # fmt: skip
    session.run_hardware()
    session.recommendation = recommend(session.profile, session.hardware, Workload())  # type: ignore[arg-type]
    _print_recommendation(session)
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("re-shard first:")]
    if not advised:
        assert not lines
        return
    assert session.recommendation.data_source == "reshard-first"
    expected = reshard_command(
        uri, session.recommendation.shard_size_bytes, "http://127.0.0.1:9000"
    )
    assert lines == [f"re-shard first:  {expected}"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_reshard_then_advise_and_export_the_shards(
    s3_endpoint: S3Endpoint, s3_bucket: str, tmp_path: Path
) -> None:
    upload(s3_endpoint, s3_bucket, SPEC)
    uri = f"s3://{s3_bucket}/small-images/"
    argv = shlex.split(reshard_command(uri, 256_000, s3_endpoint.url))
    done = subprocess.run(
        [sys.executable, *argv[1:], "--verify"],
        env=environ(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "verify: OK" in done.stdout

    shards = argv[5]
    session = AdvisorSession()
    session.set_location(shards, endpoint_url=s3_endpoint.url)
    session.set_workload(Workload(batch_size=4))
    profile = session.run_profile()
    assert profile.dominant_format == "tar"
    assert any("metadata objects" in note for note in profile.notes)
    trial = session.run_trial(seconds=4)
    assert trial.sweep and max(p.samples_per_s for p in trial.sweep) > 0
    recommendation = session.run_recommend()
    assert recommendation.data_source != "reshard-first"
    _, data = session.save_export(tmp_path, "loader_cfg")
    config = json.loads(data.read_text())
    assert config["tar_samples"] is True and config["shuffle_buffer"] >= 100
    code_text = (
        "import loader_cfg, torch\n"
        "samples = [s for b in loader_cfg.make_dataloader(num_workers=0) for s in b]\n"
        "assert all(isinstance(s['jpg'], torch.Tensor) for s in samples)\n"
        "print(len(samples), len({int(s['cls']) for s in samples}))\n"
    )
    run = run_exported(tmp_path / "loader_cfg.py", code=code_text, home=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(SPEC.images), str(SPEC.classes)]

"""The CLI: tables and JSON on success, one line and a non-zero exit on every kind of failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from advisor.cli import main
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint, free_ports

SPEC = DemoSpec(images=30, image_kb=(10, 20), classes=3, shard_mb=0.2, large_files=1, large_mb=1)


@pytest.fixture
def demo_bucket(s3_endpoint: S3Endpoint, s3_bucket: str) -> str:
    upload(s3_endpoint, s3_bucket, SPEC)
    return s3_bucket


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_profile_table_and_json(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, demo_bucket: str
) -> None:
    uri = f"s3://{demo_bucket}/small-images/"
    code, out, _ = _run(capsys, "profile", uri, "--endpoint-url", s3_endpoint.url, "--quiet")
    assert code == 0
    assert "objects" in out and "30" in out and "format jpeg" in out
    code, out, _ = _run(capsys, "profile", uri, "--endpoint-url", s3_endpoint.url, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["profile"]["object_count"] == 30


def test_hardware_json_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "hardware", "--json")
    assert code == 0
    hardware = json.loads(out)["hardware"]
    assert hardware["usable_cores"] >= 1
    assert isinstance(hardware["gpus"], list)


def test_recommend_without_trial_has_plain_fields(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, demo_bucket: str
) -> None:
    code, out, _ = _run(
        capsys, "recommend", f"s3://{demo_bucket}/shards/", "--endpoint-url", s3_endpoint.url,
        "--no-trial", "--json", "--consumer-rate", "200",
    )  # fmt: skip
    assert code == 0, out
    data = json.loads(out)
    for field in ("num_workers", "pin_memory", "prefetch_factor", "data_source"):
        assert field in data
    assert data["shard_size_bytes"] > 0
    assert data["pin_memory"] is False  # no GPU here
    assert 0 <= data["num_workers"] <= max(os.cpu_count() or 1, 1)
    assert "loader-advisor-test-secret" not in out


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code, out, err = _run(capsys, *argv)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err and "secret" not in err.lower()
    return code, lines[0]


def test_bad_uri(capsys: pytest.CaptureFixture[str]) -> None:
    code, line = _error(capsys, "profile", "gs://bucket/x", "--quiet")
    assert code == 2 and "unsupported URI scheme" in line


def test_unreachable_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_ports(1)[0]
    code, line = _error(
        capsys, "profile", "s3://some-bucket/x/", "--endpoint-url", f"http://127.0.0.1:{port}",
        "--quiet",
    )  # fmt: skip
    assert code == 1 and "cannot reach" in line


def test_missing_bucket(capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint) -> None:
    code, line = _error(
        capsys, "profile", "s3://no-such-bucket-here/", "--endpoint-url", s3_endpoint.url, "--quiet"
    )
    assert code == 1 and "not found" in line


def test_access_denied(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    s3_endpoint: S3Endpoint,
    demo_bucket: str,
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "definitely-wrong")
    code, line = _error(
        capsys, "profile", f"s3://{demo_bucket}/", "--endpoint-url", s3_endpoint.url, "--quiet"
    )
    assert code == 1 and "access denied" in line
    assert "definitely-wrong" not in line


def test_empty_prefix(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, demo_bucket: str
) -> None:
    code, line = _error(
        capsys, "profile", f"s3://{demo_bucket}/empty/", "--endpoint-url", s3_endpoint.url,
        "--quiet",
    )  # fmt: skip
    assert code == 1 and "no objects" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["recommend", "/tmp", "--consumer-rate", "0"],
        ["recommend", "/tmp", "--consumer-rate", "-5"],
        ["recommend", "/tmp", "--batch-size", "1e9"],
        ["recommend", "/tmp", "--seconds", "nan"],
        ["recommend", "/tmp", "--step-time", "abc"],
    ],
)
def test_absurd_numbers_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["recommend", "--export", "class.py"], "not a Python keyword"),
        (["export", "--output", "out/my-loader.py"], "valid Python module name"),
        (["recommend", "--export", "2fast.py"], "valid Python module name"),
    ],
)
def test_export_name_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], argv: list[str], why: str
) -> None:
    """The name is checked while parsing: a URI no one can read proves no listing or trial ran."""
    with pytest.raises(SystemExit) as info:
        main([*argv, "s3://no-such-bucket/x/", "--endpoint-url", "http://127.0.0.1:9"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert why in err and argv[-1].rsplit("/", 1)[-1][:-3] in err
    assert "Traceback" not in err and "cannot reach" not in err


def test_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "advisor", "hardware", "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "usable_cores" in result.stdout

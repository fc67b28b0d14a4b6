"""`python -m advisor reshard` as a user types it: dry run, progress, verify, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.reshard.cli import _Bar
from advisor.reshard.progress import Meter
from tests.reshard.conftest import SHARD, environ, make_files, write_local


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_prints_plan_and_estimate_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = write_local(tmp_path / "src", make_files())
    dst = tmp_path / "dst"
    code, out, err = _run(
        capsys, "reshard", str(src), str(dst), "--shard-size", "64KiB", "--dry-run"
    )
    assert code == 0, err
    assert "shards" in out and "60 samples" in out and "estimate:" in out and "probe:" in out
    assert "shard sizes:" in out and "requests:" in out
    assert not any(p.is_file() for p in dst.rglob("*")) if dst.exists() else True
    code, out, _ = _run(
        capsys, "reshard", str(src), str(dst), "--shard-size", "64KiB", "--dry-run", "--json"
    )
    estimate = json.loads(out.splitlines()[-1])["estimate"]
    assert estimate["samples"] == 60 and estimate["shards"] >= 2 and estimate["seconds"] > 0


def test_run_with_verify_and_json_event_stream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = write_local(tmp_path / "src", make_files())
    code, out, err = _run(
        capsys,
        "reshard",
        str(src),
        str(tmp_path / "dst"),
        "--shard-size",
        str(SHARD),
        "--verify",
        "--json",
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    kinds = [line["event"]["kind"] for line in lines if "event" in line]
    assert "shard" in kinds and "finalized" in kinds
    final = lines[-1]
    assert final["verify"]["problems"] == [] and final["result"]["index_url"]
    code, out, _ = _run(
        capsys, "reshard", str(src), str(tmp_path / "dst"), "--shard-size", str(SHARD), "--verify"
    )
    assert code == 0 and "already committed" in out and "verify: OK" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard-size", "lots"], "not a size"),
        (["--shard-size", "1KB"], "shard_size"),
        (["--rank", "2", "--world-size", "2"], "rank 2 of world size 2"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    src = write_local(tmp_path / "src", make_files(6))
    try:
        code, _, err = _run(capsys, "reshard", str(src), str(tmp_path / "dst"), *args)
    except SystemExit as exc:  # argparse's own errors
        code, err = int(exc.code or 0), capsys.readouterr().err
    assert code == 2 and message in err


def test_cli_in_a_subprocess_reports_empty_source(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "reshard", str(tmp_path / "empty"), str(tmp_path / "d")],
        env=environ(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if not line.startswith("... ")]
    assert len(errors) == 1 and "holds no objects" in errors[0] and "Traceback" not in done.stderr


def test_json_events_from_many_writer_threads_stay_one_per_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The writer pool emits from its threads; a line split across two writes gets another
    thread's (or, under torchrun, another rank's) line glued into it, and a reader of the
    JSON stream loses both."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        bar = _Bar(quiet=False, as_json=True)
        meter = Meter(bar, shards_total=8, bytes_total=1)
        threads = [
            threading.Thread(target=lambda: [meter.emit("shard", "x" * 50) for _ in range(300)])
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 8 * 300
    assert all(json.loads(line)["event"]["kind"] == "shard" for line in lines)

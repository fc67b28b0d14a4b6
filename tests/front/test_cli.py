"""The CLI: tables and JSON on success, one line and a non-zero exit on every kind of failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.cli import _workload, build_parser, main
from advisor.core.errors import CommandErrors
from advisor.core.location import first_contact_s
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from testing import FaultProxy, Faults, When

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
    assert "objects" in out and "30" in out and "jpeg (30 objects" in out
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


def test_recommend_reads_a_short_verdict_and_the_bottleneck_once(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, demo_bucket: str
) -> None:
    """The answer leads with what to change and a verdict of 25 words at most; the bottleneck's
    reasons are said once, in the summary (they were in the headline and the summary both)."""
    code, out, _ = _run(
        capsys, "recommend", f"s3://{demo_bucket}/small-images/", "--endpoint-url",
        s3_endpoint.url, "--seconds", "4", "--consumer-rate", "100000", "--quiet",
    )  # fmt: skip
    assert code == 0, out
    head = out[out.index("Change:") :].split("\n\n")[0].splitlines()
    verdict = next(line for line in head if line.startswith("The loader"))
    assert "cannot keep up" in verdict and len(verdict.split()) <= 25
    bottleneck = next(line for line in out.splitlines() if line.startswith("bottleneck:"))
    reasons = bottleneck.split(":", 1)[1].strip()
    assert out.count(reasons) == 1
    assert not any(line.startswith("To keep up") for line in head)


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


def test_unreachable_endpoint(capsys: pytest.CaptureFixture[str], own_port: int) -> None:
    code, line = _error(
        capsys, "profile", "s3://some-bucket/x/", "--endpoint-url", f"http://127.0.0.1:{own_port}",
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
        ["recommend", "/tmp", "--get-limit", "0"],
        ["export", "/tmp", "--max-skipped-share", "1.5"],
        ["export", "/tmp", "--on-error", "ignore"],
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


def _cli(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m advisor ARGV` with AWS config files of its own (and no AWS_* from outside)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    clean.update(
        AWS_CONFIG_FILE=str(tmp_path / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "advisor", *argv],
        capture_output=True, text=True, timeout=60, env=clean, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("how", ["--profile", "AWS_PROFILE"])
@pytest.mark.parametrize("command", ["profile", "reshard", "reshard-from-s3"])
def test_a_missing_profile_is_one_line_naming_the_setting(
    tmp_path: Path, s3_endpoint: S3Endpoint, how: str, command: str
) -> None:
    (tmp_path / "config").write_text("[profile real]\nregion = us-east-1\n")
    uri = "s3://some-bucket/x/"
    verb = command.removesuffix("-from-s3")
    argv = [verb, uri] + ([str(tmp_path / "out")] if verb == "reshard" else [])
    argv += ["--endpoint-url", s3_endpoint.url, "--quiet"]
    if command == "reshard":
        argv[1:3] = [str(tmp_path), uri]  # a local source, the S3 destination opens the profile
    # "reshard-from-s3": the S3 source is read by the native reader, which took the keys in the
    # environment without asking botocore, so a missing AWS_PROFILE went unnoticed
    flag = ["--profile", "nope"] if how == "--profile" else []
    env = {"AWS_PROFILE": "nope"} if how == "AWS_PROFILE" else {}
    done = _cli(tmp_path, *argv, *flag, **env)
    assert done.returncode == 2, done.stderr
    setting = "profile= / --profile" if how == "--profile" else "AWS_PROFILE"
    assert done.stderr.splitlines() == [
        f"error: invalid input: the AWS profile 'nope' (from {setting}) is not in the AWS config "
        "files (~/.aws/config, ~/.aws/credentials, or AWS_CONFIG_FILE / "
        "AWS_SHARED_CREDENTIALS_FILE): check the name"
    ]


def test_credentials_still_expired_after_a_refresh_are_one_line(
    tmp_path: Path, s3_endpoint: S3Endpoint
) -> None:
    expired = json.dumps(
        {"Version": 1, "AccessKeyId": "AKIDSTALE", "SecretAccessKey": "stale-secret",
         "SessionToken": "t", "Expiration": "2020-01-01T00:00:00Z"}
    )  # fmt: skip
    helper = tmp_path / "creds.py"
    helper.write_text(f"print({expired!r})\n")
    (tmp_path / "config").write_text(
        f"[profile stale]\ncredential_process = {sys.executable} {helper}\n"
    )
    done = _cli(
        tmp_path, "profile", "s3://some-bucket/x/", "--endpoint-url", s3_endpoint.url,
        "--profile", "stale", "--quiet",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "error: access denied: the AWS credentials from the AWS profile 'stale' (from profile= / "
        "--profile) are still expired after a refresh: renew them (e.g. `aws sso login`, or fix "
        "the profile's credential_process) and retry"
    ]
    assert "stale-secret" not in done.stderr


def test_export_carries_the_failure_policy(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, demo_bucket: str, tmp_path: Path
) -> None:
    output = tmp_path / "skipping_loader.py"
    code, _, err = _run(
        capsys, "export", f"s3://{demo_bucket}/small-images/", "--endpoint-url", s3_endpoint.url,
        "--no-trial", "--quiet", "--on-error", "skip", "--max-skipped-share", "0.02",
        "--output", str(output),
    )  # fmt: skip
    assert code == 0, err
    exported = json.loads(output.with_suffix(".json").read_text())
    assert exported["on_error"] == "skip" and exported["max_skipped_share"] == 0.02


@pytest.mark.timing
@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["profile", "reshard"])
def test_an_endpoint_that_never_answers_is_given_up_on_within_seconds(
    s3_endpoint: S3Endpoint, demo_bucket: str, tmp_path: Path, command: str
) -> None:
    """The fault proxy accepts every connection and holds every answer back for two minutes."""
    faults = Faults(stall_head=When(after_n=0, methods=None), stall_s=120)
    with FaultProxy(s3_endpoint.url, faults=faults) as proxy:
        url, uri = proxy.url, f"s3://{demo_bucket}/small-images/"
        argv = [uri] if command == "profile" else [uri, str(tmp_path / "out")]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "advisor", command, *argv, "--endpoint-url", url],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert elapsed < first_contact_s() + 5, elapsed
    lines = done.stderr.splitlines()
    assert lines[-1] == (
        f"error: timed out: {url} accepted the connection but did not answer a listing of "
        f"{uri} in 2 x 4 s: check that it is an S3 endpoint and that it is up"
    )
    if command == "profile":  # says what it waits for, and for how long, before it waits
        assert lines[0] == f"... contacting {url} (an answer within 8 s)"


def test_the_get_limit_reaches_the_workload_the_plan_reads() -> None:
    """`--get-limit` is the user's figure for an endpoint whose limit the plan cannot know
    (COST-6 and PFX-1 read it: tests/decide/rule_cases/cost.py)."""
    args = build_parser().parse_args(["recommend", "/tmp", "--get-limit", "2,000"])
    assert _workload(args).get_limit == 2000.0
    assert _workload(build_parser().parse_args(["recommend", "/tmp"])).get_limit is None


def test_every_command_ends_a_failure_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    """CommandErrors, the one tail of the CLIs: an exit status and one line, the work's
    threads cancelled on Ctrl-C, the progress line closed however the work ends."""
    finished: list[str] = []

    class Theirs(RuntimeError):
        pass

    def ended(exc: BaseException | None) -> tuple[int | None, bool, str]:
        cancel = threading.Event()
        with CommandErrors(
            cancel=cancel, finish=lambda: finished.append("done"), own=(Theirs,)
        ) as failed:
            if exc is not None:
                raise exc
        return failed.code, cancel.is_set(), capsys.readouterr().err

    assert ended(None) == (None, False, "")
    assert ended(ValueError("batch_size=0 must be >= 1")) == (
        2, False, "error: invalid input: batch_size=0 must be >= 1\n",
    )  # fmt: skip
    assert ended(ConnectionError("refused"))[0] == 1
    assert ended(Theirs("your loader raised on batch 1")) == (
        1, False, "error: your loader raised on batch 1\n",
    )  # fmt: skip
    assert ended(KeyboardInterrupt()) == (130, True, "error: interrupted\n")
    with pytest.raises(ZeroDivisionError):  # a bug is not dressed as the user's error
        ended(ZeroDivisionError())
    assert finished == ["done"] * 6


def test_commands_that_load_nothing_answer_before_torch_is_imported(tmp_path: Path) -> None:
    """`history`, `cache`, `--help` and a mistyped argument answer in a fraction of a second:
    the command line imports torch (about 1.5 s on 2 cores) only for a command that loads."""
    code = (
        "import sys\n"
        "from advisor.cli import main\n"
        "mistyped = ['diagnose', 'm:f', '--step-time', '-1']\n"
        "for argv in (['history'], ['cache'], ['--help'], mistyped):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "sys.exit(3 if 'torch' in sys.modules else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

"""Anonymous access end to end: `--anonymous` reaches the session, the data set is read with
unsigned requests through the real SeaweedFS (a bucket whose policy lets anyone read it), and
the export builds its reader unsigned and says so in its JSON, with no credentials in either."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor import before_after as before_after_module
from advisor import cli
from advisor.core.location import DatasetLocation
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.session import AdvisorSession
from native_loader import ReaderConfig, S3Reader
from native_loader.settings import LoaderConfig
from tests.export_helpers import import_exported

SPEC = DemoSpec(images=12, image_kb=(4, 8), classes=2, shard_mb=0.2, large_files=1, large_mb=1)
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


@pytest.fixture
def public_bucket(s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str) -> str:
    """A bucket anyone may list and read, as a public data set is."""
    upload(s3_endpoint, s3_bucket, SPEC)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:GetObject", "s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{s3_bucket}", f"arn:aws:s3:::{s3_bucket}/*"],
            }
        ],
    }
    s3_client.put_bucket_policy(Bucket=s3_bucket, Policy=json.dumps(policy))
    return s3_bucket


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials anywhere in the chain: only unsigned requests can succeed."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def locations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[DatasetLocation]]:
    """Every location the CLI points a session at."""
    seen: list[DatasetLocation] = []
    original = AdvisorSession.set_location

    def recording(self: AdvisorSession, *args: Any, **kwargs: Any) -> DatasetLocation:
        seen.append(original(self, *args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(AdvisorSession, "set_location", recording)
    yield seen


@pytest.mark.usefixtures("no_credentials")
def test_an_anonymous_recommend_reads_unsigned_and_exports_an_unsigned_reader(
    capsys: pytest.CaptureFixture[str],
    s3_endpoint: S3Endpoint,
    public_bucket: str,
    locations: list[DatasetLocation],
    tmp_path: Path,
) -> None:
    uri = f"s3://{public_bucket}/small-images/"
    output = tmp_path / "public_loader.py"
    code = cli.main(
        ["recommend", uri, "--endpoint-url", s3_endpoint.url, "--anonymous", "--no-trial",
         "--quiet", "--export", str(output)]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [location.anonymous for location in locations] == [True]
    assert "objects" in out and str(SPEC.images) in out  # listed without credentials
    exported = json.loads(output.with_suffix(".json").read_text())
    assert exported["unsigned"] is True
    source = output.read_text()
    assert "unsigned" in source and "secret" not in (source + json.dumps(exported)).lower()
    module = import_exported(output)
    try:
        assert LoaderConfig.from_dict(module.CONFIG).reader_config().unsigned is True
        dataset = module.make_dataset()
        assert len(dataset.uris()) == SPEC.images  # the exported reader lists unsigned too
    finally:
        sys.modules.pop(output.stem, None)


@pytest.mark.usefixtures("no_credentials")
def test_without_anonymous_the_same_bucket_asks_for_credentials(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, public_bucket: str
) -> None:
    uri = f"s3://{public_bucket}/small-images/"
    code = cli.main(["profile", uri, "--endpoint-url", s3_endpoint.url, "--quiet"])
    _, err = capsys.readouterr()
    assert code != 0 and "anonymous" in err.lower()


def test_a_signed_export_says_so_and_builds_a_signed_reader(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, public_bucket: str, tmp_path: Path
) -> None:
    output = tmp_path / "signed_loader.py"
    code = cli.main(
        ["export", f"s3://{public_bucket}/small-images/", "--endpoint-url", s3_endpoint.url,
         "--no-trial", "--quiet", "--output", str(output)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert json.loads(output.with_suffix(".json").read_text())["unsigned"] is False
    assert "standard AWS chain" in output.read_text()


@pytest.mark.parametrize("verb", ["profile", "trial", "recommend", "export"])
def test_every_verb_on_a_uri_takes_anonymous(verb: str) -> None:
    args = cli.build_parser().parse_args([verb, "s3://bucket/data/", "--anonymous"])
    assert args.anonymous is True
    assert cli.build_parser().parse_args([verb, "s3://bucket/data/"]).anonymous is False


def test_diagnose_passes_anonymous_to_the_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def before_after(loader: Any, uri: str, **kwargs: Any) -> Any:
        seen.update(kwargs, uri=uri)
        raise ValueError("stop here: the arguments are what this test checks")

    monkeypatch.setattr(before_after_module, "before_after", before_after)
    code = cli.main(
        ["diagnose", "tests.front.test_anonymous:_no_loader", "--step-time", "0.01", "--uri",
         "s3://bucket/data/", "--anonymous", "--quiet"]
    )  # fmt: skip
    assert code != 0
    assert seen["uri"] == "s3://bucket/data/" and seen["anonymous"] is True


def _no_loader() -> list[int]:
    return [1, 2, 3]


@pytest.mark.usefixtures("no_credentials")
def test_reshard_reads_a_public_source_unsigned(
    capsys: pytest.CaptureFixture[str], s3_endpoint: S3Endpoint, public_bucket: str, tmp_path: Path
) -> None:
    """The source read with no credentials at all; the destination here is a local folder."""
    source = f"s3://{public_bucket}/small-images/"
    argv = ["reshard", source, str(tmp_path / "shards"), "--endpoint-url", s3_endpoint.url,
            "--shard-size", "64KiB", "--quiet", "--json"]  # fmt: skip
    assert cli.main(argv) != 0  # signed requests need credentials, and there are none
    capsys.readouterr()
    code = cli.main([*argv, "--anonymous"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])["result"]  # after the JSON events
    assert result["samples_written"] == SPEC.images


@pytest.mark.usefixtures("no_credentials")
def test_the_wizards_toggle_reaches_the_export(s3_endpoint: S3Endpoint, public_bucket: str) -> None:
    from advisor.wizard import WizardController

    c = WizardController(AdvisorSession())
    c.dataset_step.uri, c.dataset_step.endpoint_url = (
        f"s3://{public_bucket}/small-images/",
        s3_endpoint.url,
    )
    c.dataset_step.anonymous = True
    assert c.run_profile() and c.wait(60), c.errors
    assert c.profile is not None and c.profile.object_count == SPEC.images, c.errors
    assert c.run_hardware() and c.wait(30), c.errors
    assert c.run_recommend() and c.build_export(), c.errors
    bundle = c.export_step.bundle
    assert bundle is not None and bundle.config.unsigned is True
    assert json.loads(bundle.json_text)["unsigned"] is True


def test_an_unsigned_request_to_a_private_bucket_says_it_was_unsigned(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    """'Access Denied' alone reads as wrong credentials; --anonymous sent none on purpose."""
    s3_client.put_object(Bucket=s3_bucket, Key="private.bin", Body=b"secret data")
    config = ReaderConfig(endpoint_url=s3_endpoint.url, unsigned=True)
    with S3Reader(config) as reader, pytest.raises(PermissionError) as refused:
        reader.read(f"s3://{s3_bucket}/private.bin")
    assert "unsigned on purpose" in str(refused.value) and "--anonymous" in str(refused.value)
    # signed, the same object reads
    with S3Reader(ReaderConfig(endpoint_url=s3_endpoint.url)) as reader:
        assert bytes(reader.read(f"s3://{s3_bucket}/private.bin")) == b"secret data"

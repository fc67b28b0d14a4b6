"""advisor.before_after against the real SeaweedFS with no AWS variables in the
the session's credentials reach the exported loader in this process, never its file."""

from __future__ import annotations

import html
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.before_after import before_after, exported_loader
from advisor.core.bounds import LoopLimits
from advisor.core.units import data_rate, duration
from advisor.core.workload import Workload
from advisor.demo.server import S3Endpoint
from advisor.report.before_after import before_after_dict, before_after_headline
from native_loader import Credentials
from tests.export_helpers import advised_session

QUICK = LoopLimits(max_batches=30, max_seconds=1.5, batch_timeout_s=20, first_batch_timeout_s=30)


class SlowBatches:
    """The user's loader: batches of 8 that each take 20 ms to load, in the main process."""

    def __iter__(self) -> Iterator[list[bytes]]:
        for _ in range(10_000):
            time.sleep(0.02)
            yield [bytes(1000)] * 8


@pytest.fixture
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)


def test_the_exported_loader_reads_with_the_sessions_credentials_and_stores_none(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path,
    no_aws_environment: None,
) -> None:  # fmt: skip
    for i in range(48):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin", Body=bytes(20_000))
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    result = before_after(
        SlowBatches(), f"s3://{s3_bucket}/data/", seconds_per_batch=0.02,
        endpoint_url=s3_endpoint.url, credentials=credentials, trial_seconds=6, limits=QUICK,
    )  # fmt: skip
    assert not any(name.startswith("AWS_") for name in os.environ)
    assert len(result.comparison.after) == 2
    after = result.comparison.pooled("after", "overall_samples_per_s")
    assert after is not None and after.median > 0
    headline = before_after_headline(result)
    assert "samples/s" in headline[0] and "data wait" in headline[0]
    assert any(line.startswith("your loader's bottleneck: ") for line in headline)
    # `print(result)` and a notebook show the headline, not the dataclass's repr
    assert str(result) == "\n".join(headline) and len(headline) <= 8
    shown = result._repr_html_()
    assert "BeforeAfter(" not in shown and all(html.escape(line) in shown for line in headline)

    session = advised_session(
        f"s3://{s3_bucket}/data/", Workload(batch_size=8), endpoint_url=s3_endpoint.url,
        credentials=credentials,
    )  # fmt: skip
    loader = exported_loader(session, tmp_path)
    assert sum(len(batch) for batch in loader) == 48
    written = (tmp_path / "recommended_loader.py").read_text() + (
        tmp_path / "recommended_loader.json"
    ).read_text()
    assert s3_endpoint.credentials.secret_key not in written
    assert s3_endpoint.credentials.access_key not in written


def test_a_copy_local_advice_names_its_copy_measured_and_the_home_cache(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, tmp_path: Path,
    no_aws_environment: None, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Where the advised loader first copies the set to local disk, the before/after says so
    first, with the size and the time and rate its prepare() measured (not an assumed rate),
    where the copy is and what the home cache holds after it; the JSON carries the record."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))  # the copy lands in this home's cache, not the real one
    # ... and the demo's cache, which other tests of the session fill, is not this home's
    monkeypatch.setenv(
        "LOADER_ADVISOR_DEMO_CACHE", str(home / ".cache" / "loader-advisor" / "demo")
    )
    for i in range(48):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin", Body=bytes(20_000))
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    result = before_after(
        SlowBatches(), f"s3://{s3_bucket}/data/", seconds_per_batch=0.02,
        endpoint_url=s3_endpoint.url, credentials=credentials, trial_seconds=6, limits=QUICK,
    )  # fmt: skip
    assert result.recommendation.data_source == "copy-local", result.recommendation.path()
    copy = result.copy
    assert copy is not None and copy.report is not None and copy.fresh  # this run's copy
    assert copy.folder.startswith(str(home / ".cache" / "loader-advisor"))
    assert (copy.report.objects, copy.report.bytes) == (48, 48 * 20_000)
    assert copy.report.copied_bytes == 48 * 20_000 and copy.report.seconds > 0
    assert len(list(Path(copy.folder).glob("*.bin"))) == 48
    headline = before_after_headline(result)
    rate = data_rate(copy.report.bytes_per_s)
    assert headline[0].startswith(
        f"copy 938 KiB to local disk first ({duration(copy.report.seconds)} at the measured {rate})"
    ), headline
    assert "samples/s" in headline[0] and "200 MB/s" not in " ".join(headline)
    note = next(line for line in headline if line.startswith("The local copy is in"))
    assert copy.folder in note and "the home cache ~/.cache/loader-advisor holds 9" in note
    assert "python -m advisor cache" in note
    assert before_after_dict(result)["local_copy"]["report"]["copied_bytes"] == 48 * 20_000

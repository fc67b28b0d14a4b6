"""The storage answers errors (`testing.FaultProxy` in front of SeaweedFS): 5xx on a fifth of
GETs read through with every byte right and the retries counted in `loader_stats`; 5xx on the
first LIST retried as every request is; a clock too far off the storage's named as such."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.core.errors import describe
from advisor.core.location import DatasetLocation, check_answers
from advisor.demo.server import S3Endpoint
from native_loader import S3Error
from native_loader.errors import ClockSkewError
from testing import FaultProxy, Faults, When
from tests.native.conftest import through_proxy


def test_two_500s_on_the_first_listing_are_retried_as_every_request_is(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    """The first contact (`check_answers`, before `recommend` profiles) bounds its time, not its
    attempts: two 500s, which the reader retries 5 times, do not end it after 2."""
    s3_client.put_object(Bucket=s3_bucket, Key="d/0.bin", Body=b"x")
    faults = Faults(error=When(first_n=2), error_status=500, error_code="InternalError")
    with FaultProxy(s3_endpoint.url, faults=faults) as proxy:
        location = DatasetLocation(f"s3://{s3_bucket}/d/", endpoint_url=proxy.url)
        check_answers(location)
        assert proxy.stats().faults_injected == {"error": 2}
    faults = Faults(error=When(after_n=0), error_status=500, error_code="InternalError")
    with FaultProxy(s3_endpoint.url, faults=faults) as proxy:
        location = DatasetLocation(f"s3://{s3_bucket}/d/", endpoint_url=proxy.url)
        with pytest.raises(S3Error, match=r"InternalError \(HTTP 500.* after 5 attempts$"):
            check_answers(location)
        assert proxy.stats().faults_injected == {"error": 5}  # the reader's max_attempts


@pytest.mark.parametrize(
    ("server_clock_s", "words"),
    [
        (-20 * 60, "this machine's clock is 20 minutes ahead of the storage's"),
        (3 * 3600, "this machine's clock is 3.0 hours behind the storage's"),
    ],
)
def test_a_clock_too_far_off_the_storages_is_named(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, server_clock_s: float, words: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")
    faults = Faults(
        error=When(after_n=0, methods=None), error_status=403,
        error_code="RequestTimeTooSkewed", server_clock_s=server_clock_s,
    )  # fmt: skip
    with through_proxy(s3_endpoint, faults) as (reader, proxy):
        with pytest.raises(PermissionError) as raised:
            reader.read(f"s3://{s3_bucket}/k")
        # one GET, refused and not asked again, and one HEAD that read the storage's time
        assert proxy.stats().faults_injected == {"error": 2}
        with pytest.raises(ClockSkewError, match=words):
            list(reader.list(f"s3://{s3_bucket}/"))
    message = str(raised.value)
    assert isinstance(raised.value, ClockSkewError)
    assert words in message
    assert "sync this machine's clock (chrony or ntpd) and retry" in message
    assert "RequestTimeTooSkewed (HTTP 403" in message and f"s3://{s3_bucket}/k" in message
    said = describe(raised.value)
    assert said.startswith(words) and "access denied" not in said

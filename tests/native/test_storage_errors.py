"""The storage answers errors (`testing.FaultProxy` in front of SeaweedFS): 5xx on a fifth of
GETs read through with every byte right and the retries counted in `loader_stats`; 5xx on the
first LIST retried as every request is; a clock too far off the storage's named as such."""

from __future__ import annotations

import gc
import os
from typing import Any

import pytest

from advisor.core.errors import describe
from advisor.core.location import DatasetLocation, check_answers
from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ReaderConfig, S3Error
from native_loader.errors import ClockSkewError
from native_loader.loader import LoaderSettings, loader_stats, make_dataloader, make_dataset
from testing import FaultProxy, Faults, When
from tests.native.conftest import through_proxy


def keep(data: memoryview) -> bytes:
    return bytes(data)


def test_500s_and_503s_on_a_fifth_of_gets_read_every_byte_and_count_the_retries(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    objects = {f"d/{i:03}.bin": os.urandom(2000 + i) for i in range(60)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    # GET 1 is the listing; then every 10th GET answers 500 InternalError, and every 10th
    # from the 5th 503 SlowDown: a fifth of them, for the whole epoch
    faults = Faults(
        error=When(every_n=10), error_status=500, error_code="InternalError",
        slow_down=When(requests=range(5, 1000, 10)),
    )  # fmt: skip
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    with FaultProxy(s3_endpoint.url, faults=faults, io_timeout_s=10) as proxy:
        config = ReaderConfig(
            endpoint_url=proxy.url, region=s3_endpoint.region, backoff_base_s=0.01,
            backoff_max_s=0.1, max_inflight_requests=4,
        )  # fmt: skip
        dataset = make_dataset(
            f"s3://{s3_bucket}/d/", config=config, credentials=credentials, transform=keep
        )
        loader = make_dataloader(dataset, LoaderSettings(batch_size=4, num_workers=2))
        got = sorted(sample for batch in loader for sample in batch)
        injected = proxy.stats().faults_injected
    assert got == sorted(objects.values())
    assert injected["error"] >= 5 and injected["slow_down"] >= 5
    stats = loader_stats(loader)
    assert stats["samples_seen"] == len(objects)
    # each injected answer was asked again once: the workers' retries, all of them counted
    assert stats["retries"] == injected["error"] + injected["slow_down"]
    assert stats["throttled"] == injected["slow_down"]


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


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (403, "ExpiredToken", PermissionError),
        (403, "InvalidAccessKeyId", PermissionError),
        (404, "NoSuchBucket", FileNotFoundError),  # the bucket deleted after the export
    ],
)
def test_credentials_revoked_or_the_bucket_gone_mid_epoch_end_it_named_without_retrying(
    s3_endpoint: S3Endpoint,
    s3_client: Any,
    s3_bucket: str,
    status: int,
    code: str,
    raised: type[OSError],
) -> None:
    for i in range(40):
        s3_client.put_object(Bucket=s3_bucket, Key=f"d/{i:03}.bin", Body=os.urandom(1000))
    faults = Faults(error=When(after_n=10), error_status=status, error_code=code)
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    with FaultProxy(s3_endpoint.url, faults=faults, io_timeout_s=10) as proxy:
        config = ReaderConfig(
            endpoint_url=proxy.url, region=s3_endpoint.region, max_inflight_requests=2
        )
        dataset = make_dataset(
            f"s3://{s3_bucket}/d/", config=config, credentials=credentials, transform=keep
        )
        loader = make_dataloader(dataset, LoaderSettings(batch_size=2, num_workers=2))
        with pytest.raises(raised, match=code) as error:
            for _ in loader:
                pass
        said = describe(error.value)
        answered = proxy.stats().faults_injected["error"]
        del error  # its traceback holds the loader's iterator, and so its workers
        gc.collect()
    assert answered <= 2 * 2 * 4  # a refusal is not asked again: what was in flight, at most
    assert f"{code} (HTTP {status}" in said

"""The local S3 endpoint: a real server that verifies signatures, lists, and serves ranges."""

from __future__ import annotations

import os

import botocore.exceptions
import pytest

from advisor.demo.server import S3Credentials, S3Endpoint, S3Server, free_ports


def test_free_ports_are_distinct() -> None:
    ports = free_ports(12)
    assert len(set(ports)) == 12


def test_roundtrip_listing_and_ranges(s3_client, s3_bucket: str) -> None:  # type: ignore[no-untyped-def]
    key = "dir with space/ü+%=.bin"
    s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"0123456789")
    listed = s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [(key, 10)]
    got = s3_client.get_object(Bucket=s3_bucket, Key=key, Range="bytes=2-4")["Body"].read()
    assert got == b"234"


def test_wrong_secret_is_refused(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    wrong = S3Endpoint(
        url=s3_endpoint.url,
        credentials=S3Credentials(s3_endpoint.credentials.access_key, "not-the-secret"),
    )
    with pytest.raises(botocore.exceptions.ClientError) as info:
        wrong.boto3_client().list_objects_v2(Bucket=s3_bucket)
    assert info.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_server_stops_and_removes_its_data() -> None:
    server = S3Server(credentials=S3Credentials("k" * 8, "s" * 16))
    endpoint = server.start()
    pid = server.pid
    data_dir = server._data_dir
    assert pid is not None and data_dir is not None and data_dir.exists()
    endpoint.boto3_client().create_bucket(Bucket="stop-test")
    server.stop()
    assert not data_dir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

"""What the runtime's tests share: a second S3 endpoint, the reader behind the fault-injecting
(and latency-emulating) proxy, tar shards built in memory, and a DataLoader over forked
workers."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from torch.utils.data import DataLoader, Dataset

from advisor.demo.proxy import NetworkProfile
from advisor.demo.server import S3Credentials, S3Endpoint, S3Server
from native_loader import Credentials, ReaderConfig, S3Reader
from testing import FaultProxy, Faults

PART = 64 * 2**10
NO_FAULTS = Faults()
PLAIN_NETWORK = NetworkProfile()


@pytest.fixture(scope="session")
def second_s3_endpoint() -> Iterator[S3Endpoint]:
    """Another SeaweedFS server, started on first use: the same bucket names on another
    endpoint, for tests of what must never be mixed up between endpoints."""
    credentials = S3Credentials(
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    )
    with S3Server(credentials=credentials) as endpoint:
        yield endpoint


@contextmanager
def through_proxy(
    endpoint: S3Endpoint,
    faults: Faults = NO_FAULTS,
    network: NetworkProfile = PLAIN_NETWORK,
    **overrides: Any,
) -> Iterator[tuple[S3Reader, FaultProxy]]:
    """A reader of `endpoint` through a `FaultProxy` with `faults` and `network` (latency,
    bandwidth), in 64 KiB parts with quick retries; `overrides` change its ReaderConfig."""
    settings: dict[str, Any] = {
        "region": endpoint.region,
        "part_size": PART,
        "max_inflight_bytes": 16 * PART,
        "max_inflight_requests": 8,
        "max_attempts": 4,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.1,
    }
    settings.update(overrides)
    credentials = Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)
    with FaultProxy(endpoint.url, faults=faults, network=network, io_timeout_s=10) as proxy:
        config = ReaderConfig(endpoint_url=proxy.url, **settings)
        with S3Reader(config, credentials=credentials) as reader:
            yield reader, proxy


def tar_bytes(samples: dict[str, dict[str, bytes]], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    """A tar shard in memory: a member `key.ext` for every field of every sample."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for key, fields in samples.items():
            for ext, data in fields.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def list_batches(batch: list[Any]) -> list[Any]:
    """A collate_fn that keeps a batch as the list of its samples."""
    return batch


def forked_loader(dataset: Dataset[Any], batch_size: int, workers: int) -> DataLoader[Any]:
    """A DataLoader of list batches; its `workers` are forked (they inherit the parent's reader)
    and a batch that takes over 60 s fails the test instead of hanging it."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=workers,
        collate_fn=list_batches,
        multiprocessing_context="fork" if workers else None,
        timeout=60 if workers else 0,
    )

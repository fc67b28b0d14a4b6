"""A reader created before DataLoader forks its workers keeps working in every worker."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset

from advisor.demo.server import S3Endpoint
from native_loader import Credentials, ReaderConfig, S3Reader
from tests.native.conftest import forked_loader


class _ObjectDataset(Dataset[tuple[int, bytes]]):
    def __init__(self, reader: S3Reader, uris: list[str]) -> None:
        self.reader = reader
        self.uris = uris

    def __len__(self) -> int:
        return len(self.uris)

    def __getitem__(self, index: int) -> tuple[int, bytes]:
        return os.getpid(), bytes(self.reader.read(self.uris[index]))


# 4 workers on a 2-core machine is the point of the test, not a mistake.
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_reader_survives_fork(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, workers: int
) -> None:
    objects = {f"d/{i:03d}": os.urandom(1000 + i) for i in range(24)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    uris = [f"s3://{s3_bucket}/{k}" for k in objects]
    config = ReaderConfig(endpoint_url=s3_endpoint.url, region=s3_endpoint.region)
    credentials = Credentials(
        s3_endpoint.credentials.access_key, s3_endpoint.credentials.secret_key
    )
    with S3Reader(config, credentials=credentials) as reader:
        # The parent uses the reader first: its engine thread and connections exist at fork time.
        assert bytes(reader.read(uris[0])) == objects["d/000"]
        loader = forked_loader(_ObjectDataset(reader, uris), 3, workers)
        seen = [item for batch in loader for item in batch]
        # The parent's reader still works after the workers are gone.
        assert bytes(reader.read(uris[-1])) == objects["d/023"]
    assert [data for _, data in seen] == list(objects.values())
    pids = {pid for pid, _ in seen}
    if workers:
        assert os.getpid() not in pids
        assert len(pids) == workers
    else:
        assert pids == {os.getpid()}
    assert torch.utils.data.get_worker_info() is None


_FORK_SCRIPT = """
import gc, os, signal, sys
from native_loader import Credentials, ReaderConfig, S3Reader

url, bucket, access_key, secret_key = sys.argv[1:5]
reader = S3Reader(ReaderConfig(endpoint_url=url), credentials=Credentials(access_key, secret_key))
uri = f"s3://{bucket}/k"
assert bytes(reader.read(uri)) == b"hello"
pid = os.fork()
if pid == 0:
    signal.alarm(30)  # a hung child must not outlive the test
    ok = bytes(reader.read(uri)) == b"hello"
    del reader
    gc.collect()
    sys.exit(0 if ok else 3)  # a normal exit: finalisers run on the parent's engine too
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert bytes(reader.read(uri)) == b"hello"
reader.close()
print("ok")
"""


def test_forked_child_reads_and_exits_cleanly(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"hello")
    creds = s3_endpoint.credentials
    args = [s3_endpoint.url, s3_bucket, creds.access_key, creds.secret_key]
    done = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

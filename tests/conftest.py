"""Shared fixtures: one real SeaweedFS S3 endpoint per session, a fresh bucket per test.

Tests never see real credentials: the AWS environment is replaced by dummy credentials before
anything imports botocore, and instance-metadata lookups are disabled (no traffic off loopback).
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before any test module resolves credentials: dummy credentials only, no profile files, no IMDS.
for _name in list(os.environ):
    if _name.startswith("AWS_"):
        del os.environ[_name]
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "loader-advisor-test",
        "AWS_SECRET_ACCESS_KEY": "loader-advisor-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
)

# Generated demo data is cached across kernels under ~/.cache; the tests keep a cache of their
# own, empty at the start of every run, so that a first start is a cold start as a new user's is.
_DEMO_CACHE = tempfile.mkdtemp(prefix="loader-advisor-test-demo-cache-")
os.environ["LOADER_ADVISOR_DEMO_CACHE"] = _DEMO_CACHE

from advisor.demo.server import S3Credentials, S3Endpoint, S3Server  # noqa: E402
from testing import machine_load  # noqa: E402
from testing.ports import held_port  # noqa: E402

_bucket_numbers = itertools.count()

# The user's home as the system knows it, whatever HOME says: what the suite must never write to.
_REAL_USER_CACHE = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "loader-advisor"


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.is_dir() else set()


@pytest.fixture(scope="session", autouse=True)
def real_home_untouched() -> Iterator[None]:
    """Fails the session if the real ~/.cache/loader-advisor gained a file: a test once left a
    40-object copy there that a later real export read as its own."""
    before = _listing(_REAL_USER_CACHE)
    yield
    gained = sorted(_listing(_REAL_USER_CACHE) - before)
    assert not gained, f"the tests wrote into the real {_REAL_USER_CACHE}: {gained[:10]}"


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test (and every process it starts) gets a HOME and cache folders of its own, so
    that `~/.cache/loader-advisor` in the code under test never means the user's. The demo
    cache stays the session's (generating it takes about 20 s)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", _DEMO_CACHE)
    return home


@pytest.fixture
def own_port() -> Iterator[int]:
    """A port on 127.0.0.1 that this test holds (`testing.ports.held_port`): connections to it
    are refused, and only a server the test starts on it binds it; never a port found free and
    released, which a test running beside this one can take in between."""
    with held_port() as port:
        yield port


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A SeaweedFS server on 127.0.0.1 for the whole session, accepting the dummy credentials."""
    credentials = S3Credentials(
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    )
    with S3Server(credentials=credentials) as endpoint:
        yield endpoint


@pytest.fixture
def s3_client(s3_endpoint: S3Endpoint):  # type: ignore[no-untyped-def]
    return s3_endpoint.boto3_client()


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint, s3_client, request: pytest.FixtureRequest) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A new, empty bucket for one test, emptied and deleted afterwards."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t{next(_bucket_numbers)}-{os.getpid()}-{stem}"[:63].rstrip("-")
    s3_client.create_bucket(Bucket=name)
    yield name
    paginator = s3_client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3_client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
    s3_client.delete_bucket(Bucket=name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the S3 endpoint, so `make unit` can leave them out."""
    for item in items:
        if {"s3_endpoint", "second_s3_endpoint"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.s3)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A failed timing test says what else kept the machine's cores busy meanwhile."""
    if item.get_closest_marker("timing") is None:
        yield
        return
    before = machine_load.read()
    outcome = yield
    if outcome.excinfo is not None:  # type: ignore[attr-defined]
        own = machine_load.tree(os.getpid())
        words = machine_load.said(before, machine_load.read(), own)
        item.add_report_section("call", "machine", words)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_DEMO_CACHE, ignore_errors=True)

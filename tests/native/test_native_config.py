"""ReaderConfig / Credentials validation, parse_uri and the error table (no network)."""

from __future__ import annotations

import dataclasses
import os
import pickle
from typing import Any

import pytest

from native_loader import Credentials, ReaderConfig, S3Error, parse_uri
from native_loader._client import PYTHON_ONLY_FIELDS, engine_config, environment_settings
from native_loader._native import EngineConfig, EngineStats, ErrorKind
from native_loader.errors import error_from_outcome
from native_loader.reader import STAT_NAMES

# EngineConfig fields Python resolves from ReaderConfig and the environment (not copied by name).
RESOLVED_FIELDS = {"endpoint", "region", "path_style", "ca_bundle"}


def test_defaults() -> None:
    config = ReaderConfig()
    assert config.part_size == 8 * 2**20
    assert config.max_inflight_bytes == 256 * 2**20
    assert dataclasses.asdict(config)["addressing_style"] == "auto"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("endpoint_url", "127.0.0.1:9000", "must start with http"),
        ("endpoint_url", "http://127.0.0.1:9000/s3", "has a path"),
        ("addressing_style", "dns", "addressing_style"),
        ("max_inflight_requests", 0, "max_inflight_requests"),
        ("part_size", 1024, "part_size"),
        ("max_inflight_bytes", 2**20, "max_inflight_bytes"),
        ("connect_timeout_s", 0, "connect_timeout_s"),
        ("stall_timeout_s", float("nan"), "stall_timeout_s"),
        ("max_attempts", 0, "max_attempts"),
        ("backoff_max_s", 0.01, "backoff_max_s"),
        ("max_throttled_s", -1, "max_throttled_s"),
        ("max_throttled_s", float("inf"), "max_throttled_s"),
        ("region", " ", "region"),
    ],
)
def test_rejects_nonsense(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReaderConfig(**{field: value})  # type: ignore[arg-type]


def test_rejects_wrong_types() -> None:
    with pytest.raises(TypeError, match="part_size"):
        ReaderConfig(part_size=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="adaptive_rate"):
        ReaderConfig(adaptive_rate=1)  # type: ignore[arg-type]


def test_credentials_hide_secrets() -> None:
    creds = Credentials("AKID", "very-secret", "session-token-value")
    text = repr(creds)
    assert "AKID" in text
    assert "very-secret" not in text
    assert "session-token-value" not in text
    with pytest.raises(ValueError):
        Credentials("AKID", "")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/a/b.jpg", ("s3", "bucket", "a/b.jpg")),
        ("s3://bucket/prefix/", ("s3", "bucket", "prefix/")),
        ("s3://bucket", ("s3", "bucket", "")),
        ("S3://bucket/k", ("s3", "bucket", "k")),
        ("s3://bucket/a b+c%=ü", ("s3", "bucket", "a b+c%=ü")),
        ("file:///abs/path", ("file", "/", "abs/path")),
        ("file://localhost/abs/a%20b", ("file", "/", "abs/a b")),
        ("/abs/path", ("file", "/", "abs/path")),
        ("/abs/dir/", ("file", "/", "abs/dir/")),
    ],
)
def test_parse_uri(uri: str, expected: tuple[str, str, str]) -> None:
    assert parse_uri(uri) == expected


def test_parse_relative_path() -> None:
    scheme, root, key = parse_uri("data/x.bin")
    assert (scheme, root) == ("file", "/")
    assert os.path.join(root, key) == os.path.abspath("data/x.bin")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("", "empty"),
        ("s3://", "no bucket"),
        ("s3:///key", "no bucket"),
        ("s3://bad bucket/k", "invalid bucket name"),
        ("gs://bucket/k", "unsupported URI scheme 'gs'"),
        ("file://otherhost/p", "another host"),
    ],
)
def test_parse_uri_errors(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_uri(uri)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((ErrorKind.HTTP, 404, "NoSuchKey", "gone", "r1", 1), FileNotFoundError),
        ((ErrorKind.HTTP, 404, "NoSuchBucket", "", "", 1), FileNotFoundError),
        ((ErrorKind.HTTP, 403, "SignatureDoesNotMatch", "bad sig", "r2", 1), PermissionError),
        ((ErrorKind.HTTP, 403, "AccessDenied", "", "", 1), PermissionError),
        ((ErrorKind.HTTP, 416, "InvalidRange", "past the end", "r3", 1), S3Error),
        ((ErrorKind.HTTP, 503, "SlowDown", "slow", "r4", 5), S3Error),
        ((ErrorKind.TIMEOUT, 0, "", "transfer stalled", "", 5), TimeoutError),
        ((ErrorKind.CONNECT, 0, "", "Connection refused", "", 5), ConnectionError),
        ((ErrorKind.NETWORK, 0, "", "truncated body", "", 5), ConnectionError),
        ((ErrorKind.PROTOCOL, 200, "", "response had no usable body", "", 1), S3Error),
        ((ErrorKind.MEMORY, 0, "", "cannot allocate 5 bytes", "", 1), MemoryError),
        ((ErrorKind.CLOSED, 0, "", "the reader was closed", "", 1), ValueError),
    ],
)
def test_error_table_and_pickling(
    args: tuple[ErrorKind, int, str, str, str, int], expected: type
) -> None:
    exc = error_from_outcome(*args, uri="s3://b/k")
    assert type(exc) is expected
    clone = pickle.loads(pickle.dumps(exc))
    assert type(clone) is expected
    assert str(clone) == str(exc)
    assert "s3://b/k" in str(exc)
    if isinstance(exc, S3Error):
        assert isinstance(clone, S3Error)
        assert (clone.code, clone.status, clone.request_id, clone.uri) == (
            exc.code,
            exc.status,
            exc.request_id,
            exc.uri,
        )
    if args[0] is ErrorKind.HTTP and expected is not S3Error:
        assert isinstance(exc.__cause__, S3Error)
        assert exc.__cause__.code == args[2]


def test_every_error_kind_raises() -> None:
    failures = [kind for kind in ErrorKind if kind is not ErrorKind.NONE]
    assert len(failures) == 7
    for kind in failures:
        assert isinstance(error_from_outcome(kind, 0, "", "m", "", 1, "s3://b/k"), Exception)


def test_s3_error_is_an_oserror() -> None:
    err = S3Error("x", code="InvalidRange", status=416, request_id="r", uri="s3://b/k")
    assert isinstance(err, OSError)
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.code, clone.status, clone.uri) == ("InvalidRange", 416, "s3://b/k")


def test_reader_argument_types() -> None:
    from native_loader import S3Reader

    with pytest.raises(TypeError, match="ReaderConfig"):
        S3Reader({"region": "us-east-1"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Credentials"):
        S3Reader(credentials=("key", "secret"))  # type: ignore[arg-type]


def test_every_reader_config_field_crosses_or_is_python_only() -> None:
    """A new ReaderConfig field must be bound on EngineConfig or listed as Python-only."""
    bound = {name for name in vars(EngineConfig) if not name.startswith("_")}
    fields = {f.name for f in dataclasses.fields(ReaderConfig)}
    neither = {name for name in fields - PYTHON_ONLY_FIELDS if name not in bound}
    assert not neither, f"ReaderConfig fields neither bound nor Python-only: {sorted(neither)}"
    assert PYTHON_ONLY_FIELDS.issubset(fields)
    # Every bound field is filled: copied from ReaderConfig or resolved in Python.
    assert bound == (fields - PYTHON_ONLY_FIELDS) | RESOLVED_FIELDS


def test_engine_config_carries_every_field() -> None:
    config = ReaderConfig(
        unsigned=True,
        max_inflight_requests=7,
        max_inflight_bytes=3 * 2**20,
        part_size=2**20,
        connect_timeout_s=1.5,
        first_byte_timeout_s=2.5,
        stall_timeout_s=3.5,
        max_attempts=9,
        backoff_base_s=0.25,
        backoff_max_s=4.5,
        adaptive_rate=False,
        max_throttled_s=12.5,
    )
    native = engine_config(
        config, endpoint="http://h:1", region="eu-west-1", path_style=True, ca_bundle="/ca.pem"
    )
    for f in dataclasses.fields(ReaderConfig):
        if f.name not in PYTHON_ONLY_FIELDS:
            assert getattr(native, f.name) == getattr(config, f.name), f.name
    resolved = {name: getattr(native, name) for name in RESOLVED_FIELDS}
    assert resolved == {
        "endpoint": "http://h:1",
        "region": "eu-west-1",
        "path_style": True,
        "ca_bundle": "/ca.pem",
    }


def test_stats_names_are_the_bound_counters() -> None:
    assert STAT_NAMES == (
        "active_requests",
        "peak_active_requests",
        "inflight_bytes",
        "peak_inflight_bytes",
        "requests",
        "connections",
        "retries",
        "bytes_received",
        "open_tickets",
        "throttled",
        "rate_cuts",
        "send_rate_limit",
        "rate_limited_ms",
    )
    assert all(getattr(EngineStats(), name) == 0 for name in STAT_NAMES)


# --- credentials from the environment without botocore ------------------------------------------

_AWS_VARS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_CREDENTIAL_EXPIRATION", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE",
    "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
)  # fmt: skip


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> dict[str, str]:
    """Static keys and a region in the environment, an empty shared config file."""
    for name in _AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config").write_text("")
    values = {
        "AWS_ACCESS_KEY_ID": "AKIDENV",
        "AWS_SECRET_ACCESS_KEY": "secret-env",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.mark.parametrize("token_var", [None, "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"])
def test_environment_settings_agree_with_botocore(
    aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, token_var: str | None
) -> None:
    """The oracle: the keys read without botocore are the ones botocore's chain resolves."""
    import botocore.session

    if token_var:
        monkeypatch.setenv(token_var, "token-env")
    settled = environment_settings(ReaderConfig(), "https://s3.eu-west-1.amazonaws.com")
    assert settled is not None
    credentials, ca_bundle = settled
    frozen = botocore.session.Session().get_credentials().get_frozen_credentials()
    assert (credentials.access_key, credentials.secret_key, credentials.session_token) == (
        frozen.access_key, frozen.secret_key, frozen.token,
    )  # fmt: skip
    assert ca_bundle == ""


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"profile": "other"}, "an explicit profile skips the environment's keys"),
        ({"env": ("AWS_CREDENTIAL_EXPIRATION", "2030-01-01T00:00:00Z")}, "refreshable keys"),
        ({"env": ("AWS_PROFILE", "nope")}, "a profile botocore refuses when it is not there"),
        ({"unset": "AWS_SECRET_ACCESS_KEY"}, "half a key pair: botocore says what is missing"),
        ({"unset": "AWS_DEFAULT_REGION"}, "the region may come from the profile"),
        ({"config": "[default]\nca_bundle = /corp-ca.pem\n"}, "a CA bundle in the config file"),
    ],
)
def test_environment_settings_leave_the_rest_to_botocore(
    aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], why: str
) -> None:
    config = ReaderConfig(profile=change.get("profile"))
    if "env" in change:
        monkeypatch.setenv(*change["env"])
    if "unset" in change:
        monkeypatch.delenv(change["unset"])
    if "config" in change:
        with open(aws_env["AWS_CONFIG_FILE"], "w") as f:
            f.write(change["config"])
    assert environment_settings(config, "https://s3.eu-west-1.amazonaws.com") is None, why


def test_environment_settings_ca_bundle(aws_env: dict[str, str], monkeypatch: Any) -> None:
    with open(aws_env["AWS_CONFIG_FILE"], "w") as f:
        f.write("[default]\nca_bundle = /corp-ca.pem\n")
    # plain http needs no CA: the config file's bundle does not matter
    assert environment_settings(ReaderConfig(), "http://127.0.0.1:9000") is not None
    monkeypatch.setenv("AWS_CA_BUNDLE", "/env-ca.pem")  # the environment wins over the file
    settled = environment_settings(ReaderConfig(), "https://s3.eu-west-1.amazonaws.com")
    assert settled is not None and settled[1] == "/env-ca.pem"

"""The per-process native engine behind an `S3Reader`, and what it needs from the environment.

The engine (a C++ thread driving libcurl) is created lazily, on first use in each process. A
forked child (a DataLoader worker) never uses its parent's engine: `os.register_at_fork` drops
the reference in the child, and the engine object is parked in `_ABANDONED` so its destructor
never runs there (it would join a thread that does not exist in the child).

Credentials come from botocore's standard chain (env, profile, SSO, IMDS, ...) unless explicit
`Credentials` are given. Refreshable credentials are re-read at most every
`_CREDENTIAL_CHECK_S`; botocore refreshes them well before expiry (>10 minutes ahead), so the
engine always signs with a set that has more than 5 minutes left.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import weakref
from typing import Any

from native_loader import _native
from native_loader.config import Credentials, ReaderConfig
from native_loader.errors import credential_errors

_CREDENTIAL_CHECK_S = 30.0
_ABANDONED: list[_native.Engine] = []
_SESSIONS: weakref.WeakSet[EngineSession] = weakref.WeakSet()


def resolve_region(config: ReaderConfig, session: Any | None) -> str:
    """Region: config, AWS_REGION, AWS_DEFAULT_REGION, the profile's region, "us-east-1"."""
    if config.region:
        return config.region
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    if session is not None:
        region = session.get_config_variable("region")
        if region:
            return str(region)
    return "us-east-1"


def _ca_bundle(session: Any | None) -> str:
    """Trusted CA file, as botocore finds it (AWS_CA_BUNDLE, the profile's ca_bundle)."""
    if session is not None:
        return str(session.get_config_variable("ca_bundle") or "")
    return os.environ.get("AWS_CA_BUNDLE", "")


def resolve_endpoint(config: ReaderConfig, region: str) -> tuple[str, bool]:
    """(endpoint URL, whether it is a custom endpoint)."""
    if config.endpoint_url:
        return config.endpoint_url, True
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return os.environ[name], True
    return f"https://s3.{region}.amazonaws.com", False


# ReaderConfig fields that do not cross to the engine as they are. Every other field is copied
# by name (`engine_config`), so a new field must be bound in csrc/module.cpp or listed here.
PYTHON_ONLY_FIELDS = frozenset(
    {
        "endpoint_url",  # resolved with the environment: EngineConfig.endpoint
        "region",  # resolved with the environment and profile: EngineConfig.region
        "addressing_style",  # resolved with the endpoint: EngineConfig.path_style
        "profile",  # credentials and region lookup only
        "read_ahead_bytes",  # streams (native_loader.stream) size their window in Python
    }
)


def engine_config(
    config: ReaderConfig, *, endpoint: str, region: str, path_style: bool, ca_bundle: str
) -> _native.EngineConfig:
    """The engine's settings: every crossing ReaderConfig field, plus what Python resolved."""
    native = _native.EngineConfig()
    for f in dataclasses.fields(ReaderConfig):
        if f.name not in PYTHON_ONLY_FIELDS:
            setattr(native, f.name, getattr(config, f.name))
    native.endpoint = endpoint
    native.region = region
    native.path_style = path_style
    native.ca_bundle = ca_bundle
    return native


class EngineSession:
    """Owns the engine of the current process and keeps its credentials fresh."""

    def __init__(self, config: ReaderConfig, credentials: Credentials | None) -> None:
        self._config = config
        self._explicit = credentials
        self._lock = threading.Lock()
        self._engine: _native.Engine | None = None
        self._pid = -1
        self._provider: Any = None  # botocore credentials, resolved once
        self._pushed: tuple[str, str, str] | None = None
        self._checked_at = 0.0
        self._closed = False
        _SESSIONS.add(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def engine(self) -> _native.Engine:
        with self._lock:
            if self._closed:
                raise ValueError("I/O operation on a closed S3Reader")
            with credential_errors(self._config.profile):
                if self._engine is None or self._pid != os.getpid():
                    self._abandon()
                    self._engine = self._create()
                    self._pid = os.getpid()
                self._refresh(self._engine)
            return self._engine

    def current(self) -> _native.Engine | None:
        """The engine if this process already has one (never creates it)."""
        engine = self._engine
        return engine if engine is not None and self._pid == os.getpid() else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            engine, self._engine = self._engine, None
            if engine is not None and self._pid == os.getpid():
                engine.close()
            elif engine is not None:
                _ABANDONED.append(engine)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the parent's lock may have been held by another thread
        self._abandon()

    def _abandon(self) -> None:
        if self._engine is not None and self._pid != os.getpid():
            _ABANDONED.append(self._engine)
        self._engine = None

    def _create(self) -> _native.Engine:
        config = self._config
        session = None
        if not config.unsigned and self._explicit is None:
            import botocore.session

            session = botocore.session.Session(profile=config.profile)
            self._provider = session.get_credentials()
            if self._provider is None:
                raise PermissionError(
                    "no AWS credentials found (environment, profile, SSO or instance role); "
                    "pass credentials=Credentials(...) or ReaderConfig(unsigned=True)"
                )
        elif config.region is None and not os.environ.get("AWS_REGION"):
            import botocore.session

            session = botocore.session.Session(profile=config.profile)
        region = resolve_region(config, session)
        endpoint, custom = resolve_endpoint(config, region)
        path_style = config.addressing_style == "path" or (
            config.addressing_style == "auto" and custom
        )
        engine = _native.Engine(
            engine_config(
                config,
                endpoint=endpoint,
                region=region,
                path_style=path_style,
                ca_bundle=_ca_bundle(session),
            )
        )
        self._pushed = None
        self._checked_at = 0.0
        return engine

    def _refresh(self, engine: _native.Engine) -> None:
        if self._config.unsigned:
            return
        now = time.monotonic()
        if self._pushed is not None and now - self._checked_at < _CREDENTIAL_CHECK_S:
            return
        self._checked_at = now
        if self._explicit is not None:
            current = (
                self._explicit.access_key,
                self._explicit.secret_key,
                self._explicit.session_token or "",
            )
        else:
            frozen = self._provider.get_frozen_credentials()
            current = (frozen.access_key, frozen.secret_key, frozen.token or "")
        if current != self._pushed:
            engine.set_credentials(*current)
            self._pushed = current


def _after_fork_in_child() -> None:
    for session in list(_SESSIONS):
        session.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)

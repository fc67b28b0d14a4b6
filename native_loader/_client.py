"""The per-process native engine behind an `S3Reader`, and what it needs from the environment.

The engine (a C++ thread driving libcurl) is created lazily, on first use in each process. A
forked child (a DataLoader worker) never uses its parent's engine: `os.register_at_fork` drops
the reference in the child, and the engine object is parked in `_ABANDONED` so its destructor
never runs there (it would join a thread that does not exist in the child).

Credentials come from botocore's standard chain (env, profile, SSO, IMDS, ...) unless explicit
`Credentials` are given. Where the chain's answer is already known without it (static keys in
the environment, no explicit profile, the region and CA bundle settled by config or environment),
botocore is not imported: its import costs ~0.2 s of CPU before a first epoch's first request.
Refreshable credentials are re-read at most every `_CREDENTIAL_CHECK_S`; botocore refreshes them
well before expiry (>10 minutes ahead), so the engine always signs with a set that has more than
5 minutes left.
"""

from __future__ import annotations

import ctypes
import dataclasses
import mmap
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
# Send-rate limiters shared with forked children, per endpoint as configured: anonymous
# MAP_SHARED memory, which a fork keeps shared (never unmapped: an engine may point into it).
_SHARED_LIMITERS: dict[str, tuple[mmap.mmap, int]] = {}


def shared_rate_limiter(config: ReaderConfig) -> int:
    """The address of the send-rate limiter (`adaptive_rate`) that this process shares with the
    processes it forks from now on (a DataLoader's workers), for the config's endpoint; made
    here if there is none yet. A process that was not forked from the one that made it (a
    spawned worker, another rank) gets its own."""
    key = config.endpoint_url or ""
    if key not in _SHARED_LIMITERS:
        memory = mmap.mmap(-1, _native.SHARED_LIMITER_BYTES)  # zero-filled, MAP_SHARED
        address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        _SHARED_LIMITERS[key] = (memory, address)
    return _SHARED_LIMITERS[key][1]


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


def _config_file_mentions(setting: str) -> bool:
    """Whether the shared config file could hold `setting` (botocore reads it only from there
    once the environment lacks it); an unreadable file counts as one that could."""
    path = os.environ.get("AWS_CONFIG_FILE") or os.path.join("~", ".aws", "config")
    try:
        with open(os.path.expanduser(path), "rb") as f:
            return setting.encode() in f.read()
    except FileNotFoundError:
        return False
    except OSError:
        return True


def environment_settings(config: ReaderConfig, endpoint: str) -> tuple[Credentials, str] | None:
    """(credentials, CA bundle) exactly as botocore's chain would resolve them, when that answer
    is fixed by the environment alone: static keys in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
    (the chain's first provider), no profile given in code (an explicit profile skips the
    environment's keys) nor in AWS_PROFILE / AWS_DEFAULT_PROFILE (botocore refuses a profile that
    is not in the config files, keys or not, and so must every reader), no
    AWS_CREDENTIAL_EXPIRATION (those keys are refreshed), the region set
    by config or environment, and a CA bundle that is not needed (plain http), set in
    AWS_CA_BUNDLE, or absent from the shared config file. None: ask botocore."""
    env = os.environ
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if config.profile is not None or not key or not secret:
        return None
    if env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE"):
        return None
    if env.get("AWS_CREDENTIAL_EXPIRATION"):
        return None
    if not (config.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
        return None  # the profile's region: botocore reads the config file
    ca_bundle = env.get("AWS_CA_BUNDLE", "")
    if not ca_bundle and endpoint.startswith("https") and _config_file_mentions("ca_bundle"):
        return None
    token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN")
    return Credentials(key, secret, token or None), ca_bundle


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
        self._static: Credentials | None = None  # the environment's keys, read without botocore
        self._pushed: tuple[str, str, str] | None = None
        self._checked_at = 0.0
        self._closed = False
        if config.adaptive_rate:
            shared_rate_limiter(config)  # before a fork: the children share it
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
        self._static = None
        signs_from_chain = not config.unsigned and self._explicit is None
        settled = None
        if signs_from_chain:
            guess = resolve_endpoint(config, resolve_region(config, None))[0]
            settled = environment_settings(config, guess)
        if settled is not None:
            self._static = settled[0]
        elif signs_from_chain:
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
                ca_bundle=settled[1] if settled is not None else _ca_bundle(session),
            )
        )
        if config.adaptive_rate:
            engine.share_rate_limiter(shared_rate_limiter(config))
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
        fixed = self._explicit if self._explicit is not None else self._static
        if fixed is not None:
            current = (fixed.access_key, fixed.secret_key, fixed.session_token or "")
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

"""The exact `reshard` command for a shard size (the command line and the wizard share it);
whether to re-shard at all is the advice's (`advisor.decide.resharding`)."""

from __future__ import annotations

import shlex

from native_loader.uri import uri_scheme


def default_destination(uri: str) -> str:
    """A sibling of the source: ``s3://b/images/`` -> ``s3://b/images-shards/``."""
    stem = uri.rstrip("/")
    return f"{stem}-shards/" if uri_scheme(uri) == "s3" else f"{stem}-shards"


def shard_size_text(size_bytes: int) -> str:
    if size_bytes % 10**6 == 0 or size_bytes >= 10**8:
        return f"{round(size_bytes / 1e6)}MB"
    return f"{round(size_bytes / 1e3)}KB"


def reshard_command(
    uri: str,
    shard_size_bytes: int,
    endpoint_url: str | None = None,
    destination: str | None = None,
    seed: int = 0,
) -> str:
    """The command line that packs `uri` as advised (shell-quoted)."""
    argv = [
        "python", "-m", "advisor", "reshard", uri, destination or default_destination(uri),
        "--shard-size", shard_size_text(shard_size_bytes), "--seed", str(seed),
    ]  # fmt: skip
    if endpoint_url:
        argv += ["--endpoint-url", endpoint_url]
    return shlex.join(argv)

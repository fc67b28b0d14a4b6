"""From a recommendation to the exact `reshard` command (CLI and wizard share it)."""

from __future__ import annotations

import shlex

from advisor.decide.recommend import Recommendation
from advisor.measure.profile import DatasetProfile
from native_loader.uri import uri_scheme

# Formats that already are containers of many samples: packing them again gains nothing.
CONTAINER_FORMATS = frozenset({"tar", "tfrecord", "parquet", "mds", "recordio", "jsonl"})


def advises_reshard(recommendation: Recommendation, profile: DatasetProfile | None) -> bool:
    """SRC-3 (many small files: re-shard first), or SHARD-2 (pack objects under 50 MB into
    shards) on a data set of single-sample files."""
    if recommendation.data_source == "reshard-first":
        return True
    fmt = profile.dominant_format if profile is not None else "unknown"
    return "SHARD-2" in recommendation.fired_rules and fmt not in CONTAINER_FORMATS


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

"""Whether the advice is to re-shard the set first: the wizard's and the command line's one
answer (the command that does it is `advisor.reshard.advice`'s)."""

from __future__ import annotations

from advisor.decide.recommend import Recommendation
from advisor.measure.profile import DatasetProfile

# Formats that already are containers of many samples: packing them again gains nothing.
CONTAINER_FORMATS = frozenset({"tar", "tfrecord", "parquet", "mds", "recordio", "jsonl"})


def advises_reshard(recommendation: Recommendation, profile: DatasetProfile | None) -> bool:
    """SRC-3 (many small files: re-shard first), or SHARD-2 (pack objects under 50 MB into
    shards) on a data set of single-sample files."""
    if recommendation.data_source == "reshard-first":
        return True
    fmt = profile.dominant_format if profile is not None else "unknown"
    return "SHARD-2" in recommendation.fired_rules and fmt not in CONTAINER_FORMATS

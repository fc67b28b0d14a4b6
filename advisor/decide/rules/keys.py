"""The values the rules decide (`Key`), the state they build (`State`) and what one rule
concludes (`Finding`): the vocabulary below `context` and `base`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Key(str, Enum):
    """The values the rules decide; a rule sets at most one, and the first to set it wins."""

    DATA_SOURCE = "data_source"
    AFTER_RESHARD = "after_reshard"
    CACHE_LOCALLY = "cache_locally"
    REQUESTS_IN_FLIGHT = "requests_in_flight"
    INFLIGHT_BYTES = "inflight_bytes"
    WORKERS_CAP_CORES = "workers_cap_cores"
    WORKERS_CAP_RAM = "workers_cap_ram"
    NUM_WORKERS = "num_workers"
    PREFETCH_FACTOR = "prefetch_factor"
    PIN_MEMORY = "pin_memory"
    SHARD_SIZE_BYTES = "shard_size_bytes"
    PREFIX_LAYOUT = "prefix_layout"
    EXPECTED_SAMPLES_PER_S = "expected_samples_per_s"
    INPUT_BOUND = "input_bound"


State = Mapping[Key, Any]


@dataclass(frozen=True)
class Finding:
    """What a rule concluded: the value for its key, why, and the numbers it used (with units).

    `key` is None for an advisory finding (a note that sets no value).
    """

    rule_id: str
    key: Key | None
    value: Any
    rationale: str
    evidence: dict[str, Any] = field(default_factory=dict)
    measured: bool = False
    confidence: str = "medium"  # "high" (trial measurement), "medium", "low" (defaults only)

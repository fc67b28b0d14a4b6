"""Shard size and prefixes: cases for advisor/decide/rules/layout.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import GB, MB, PFX_BY_RATE, SMALL_SET

HUGE_WHOLE = {"count": 1000, "size": 1500 * MB, "fmt": "npy", "spo": 1}

CASES: list[Case] = [
    ("SHARD-1", {"profile": {"count": 10}}, True, 1.5 * GB // 20),  # 5 workers x 4 shards
    ("SHARD-1", {"profile": {"count": 1000, "size": 100}}, True, MB),  # never under 1 MB
    ("SHARD-1", {}, False, ...),
    ("SHARD-2", {"profile": {"count": 1_000_000, "size": 5 * MB}}, True, 150 * MB),
    ("SHARD-2", {}, False, ...),
    # 1.5 GB objects read whole (npy); tar shards and text records stream within the read-ahead
    ("SHARD-3", {"profile": HUGE_WHOLE}, True, 150 * MB),
    ("SHARD-3", {"profile": {"count": 1000, "size": 1500 * MB}}, False, ...),
    ("SHARD-3", {"profile": {**HUGE_WHOLE, "fmt": "text", "records": "lines"}}, False, ...),
    ("SHARD-3", {}, False, ...),
    ("PFX-1", {"workload": {"nodes": 2, "gpus_per_node": 8}, "hardware": {"cores": 96}}, True, 16),
    # 2 ranks x ~29,400 samples/s (what the model expects with 32 requests in flight per
    # worker, over epochs of 45,000 objects per rank that each start with a first byte) of 20 KB
    # objects = ~58,800 GET/s -> 17 prefixes at the planned 3,500 GET/s each
    ("PFX-1", PFX_BY_RATE, True, 17),
    ("PFX-1", {}, False, ...),
    (
        "PFX-1",
        {"workload": {"nodes": 2, "gpus_per_node": 8}, "profile": {"prefixes": 16}},
        False,
        ...,
    ),
    (
        "PFX-1",
        {"profile": {**SMALL_SET, "spo": 1}, "workload": {"epochs": 5, "nodes": 4}},
        False,
        ...,
    ),
    # the baseline's 1,000 objects of 150 MB: no SHARD rule fires, the objects stay the shards
    ("SHARD-0", {}, True, 150 * MB),
    ("SHARD-0", {"profile": {"size": 80 * MB}}, True, 80 * MB),
    ("SHARD-0", {"profile": {"count": 10}}, False, ...),  # SHARD-1 decided
    ("SHARD-0", {"profile": {"count": 1_000_000, "size": 5 * MB}}, False, ...),  # SHARD-2
    ("SHARD-0", {"profile": HUGE_WHOLE}, False, ...),  # SHARD-3
    # streamed 1.5 GB tar shards: a worker holds its read-ahead, so their size stays
    ("SHARD-0", {"profile": {"count": 1000, "size": 1500 * MB}}, True, 1500 * MB),
    ("PFX-0", {}, True, 1),
    (
        "PFX-0",
        {"workload": {"nodes": 2, "gpus_per_node": 8}, "profile": {"prefixes": 16}},
        True,
        16,
    ),
    ("PFX-0", {"profile": {**SMALL_SET, "spo": 1}, "workload": {"epochs": 5, "nodes": 4}}, True, 1),
    ("PFX-0", PFX_BY_RATE, False, ...),  # PFX-1 decided
    (
        "PFX-0",
        {"workload": {"nodes": 2, "gpus_per_node": 8}, "hardware": {"cores": 96}},
        False,
        ...,
    ),
]

"""Cost notes: cases for advisor/decide/rules/cost.py."""

from rule_cases import Case
from rule_cases.common import HUGE_LARGE, LOCAL, MB, PFX_BY_RATE, SMALL_SET

CASES: list[Case] = [
    ("COST-1", {}, True, ...),
    ("COST-1", {"workload": {"data_location": "efs"}}, False, ...),
    ("COST-2", {}, True, ...),
    ("COST-2", {"profile": SMALL_SET, "workload": {"epochs": 5}}, True, 150.0),  # 30 GB / 200 MB/s
    # with a trial: its timed copy of a sample (50 MB in 2 s), else its probe's best read rate
    (
        "COST-2",
        {
            "profile": SMALL_SET,
            "workload": {"epochs": 5},
            "trial": {"sample_copy": (9, 50 * MB, 2.0)},
        },
        True,
        1200.0,
    ),
    ("COST-2", {"profile": SMALL_SET, "workload": {"epochs": 5}, "trial": {}}, True, 50.0),
    ("COST-2", {"profile": LOCAL}, False, ...),
    ("COST-3", {"workload": {"consumer_rate": 100_000.0}}, True, ...),
    ("COST-3", {}, False, ...),
    ("COST-4", {"profile": HUGE_LARGE, "workload": {"nodes": 4}}, True, 21 * 140.0),
    (
        "COST-4",
        {"profile": {"count": 100_000, "size": 1 * MB}, "workload": {"nodes": 2}},
        False,
        ...,
    ),
    ("COST-4", {"workload": {"data_location": "fsx"}}, False, ...),
    ("COST-4", {}, False, ...),
    # 4 shards for 2 nodes x 8 GPUs: at least 12 of the 16+ readers idle
    (
        "COST-5",
        {"profile": {"count": 4, "size": 150 * MB}, "workload": {"nodes": 2, "gpus_per_node": 8}},
        True,
        ...,
    ),
    (
        "COST-5",
        {"profile": {"count": 4, "size": 150 * MB}},
        True,
        ...,
    ),  # 4 shards, 1 rank, workers > 4
    ("COST-5", {}, False, ...),  # 1,000 shards for one rank's workers
    ("COST-5", {"workload": {"nodes": 4, "gpus_per_node": 8}}, False, ...),  # 1,000 for 32 ranks
    # 62,500 GET/s on one prefix of S3 Standard (5,500): throttled
    ("COST-6", PFX_BY_RATE, True, ...),
    # the same over 12 prefixes (66,000 GET/s): under the limit
    ("COST-6", {**PFX_BY_RATE, "profile": {**PFX_BY_RATE["profile"], "prefixes": 12}}, False, ...),
    # an S3 Express directory bucket serves 200,000 GET/s
    (
        "COST-6",
        {**PFX_BY_RATE, "profile": {**PFX_BY_RATE["profile"], "uri": "s3://b--usw2-az1--x-s3/t/"}},
        False,
        ...,
    ),
    ("COST-6", {}, False, ...),  # one rank of 150 MB shards
]

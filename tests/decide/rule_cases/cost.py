"""Cost notes: cases for advisor/decide/rules/cost.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import HUGE_LARGE, LOCAL, MB, PFX_BY_RATE, SMALL_SET

COPIED_SMALL = {"count": 90_000, "size": 500_000, "fmt": "jpeg", "spo": None}
COPIES_8 = {"nodes": 8, "epochs": 5}
FAST_COPY = {"sample_copy": (100, 50 * MB, 0.1)}  # the trial's timed copy: 500 MB/s

CASES: list[Case] = [
    ("COST-1", {}, True, ...),
    ("COST-1", {"workload": {"data_location": "efs"}}, False, ...),
    # a local copy on 8 nodes: each copies the 90,000 objects, 720,000 GETs ($0.40 per million)
    ("COST-1", {"profile": COPIED_SMALL, "workload": COPIES_8}, True, 0.29),
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
        {
            "profile": {"count": 4, "size": 150 * MB},
            "hardware": {"cores": 8},
            "trial": {"rates": {0: (100.0, 110.0), 6: (400.0, 420.0)}},
        },
        True,
        ...,
    ),  # 4 shards, 1 rank, and a trial that measured 6 workers fastest
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
    # another S3-compatible endpoint: its limit is not known, so nothing is checked ...
    (
        "COST-6",
        {**PFX_BY_RATE, "profile": {**PFX_BY_RATE["profile"], "endpoint_url": "http://minio:9000"}},
        False,
        ...,
    ),
    # ... until the user gives it: 62,500 GET/s against 20,000 per prefix; 0.8 x 20,000 GET/s
    # of 1 sample each over 2 ranks is 8,000 samples/s per rank
    (
        "COST-6",
        {
            "profile": {**PFX_BY_RATE["profile"], "endpoint_url": "http://minio:9000"},
            "hardware": PFX_BY_RATE["hardware"],
            "workload": {**PFX_BY_RATE["workload"], "get_limit": 20_000.0},
        },
        True,
        8_000.0,
    ),
    # the user's figure is per prefix: over 4 prefixes 80,000 GET/s serve the 62,500 asked
    (
        "COST-6",
        {
            "profile": {
                **PFX_BY_RATE["profile"],
                "endpoint_url": "http://minio:9000",
                "prefixes": 4,
            },
            "hardware": PFX_BY_RATE["hardware"],
            "workload": {**PFX_BY_RATE["workload"], "get_limit": 20_000.0},
        },
        False,
        ...,
    ),
    # 8 nodes each copy 90,000 objects of 500 KB (fewer than SRC-3 packs) at the copy's
    # measured 500 MB/s (the trial copied 50 MB in 0.1 s): 1,000 GET/s a node, 8,000 together
    # against 5,500 on one prefix; throttled, the copies take 720,000 GETs at 0.95 x 5,500
    # GET/s = 138 s at best
    ("COST-7", {"profile": COPIED_SMALL, "workload": COPIES_8, "trial": FAST_COPY}, True, 137.8),
    (
        "COST-7",
        {"profile": COPIED_SMALL, "workload": {"epochs": 5}, "trial": FAST_COPY},
        False,
        ...,
    ),
    # at File mode's assumed 200 MB/s a node copies 400 GET/s, 3,200 together: under the limit
    # (the storage's peak, 32 GETs in flight of 30 ms + 5.6 ms, is not the copy's rate)
    ("COST-7", {"profile": COPIED_SMALL, "workload": COPIES_8}, False, ...),
    # over 2 prefixes 11,000 GET/s serve them
    (
        "COST-7",
        {"profile": {**COPIED_SMALL, "prefixes": 2}, "workload": COPIES_8, "trial": FAST_COPY},
        False,
        ...,
    ),
    ("COST-7", PFX_BY_RATE, False, ...),  # streamed: COST-6's
]

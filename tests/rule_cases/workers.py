"""DataLoader num_workers: cases for advisor/rules/workers.py."""

from rule_cases import Case
from rule_cases.common import GB, ONE_MB, TWO_HUNDRED_MB

CASES: list[Case] = [
    ("NW-1", {"hardware": {"cores": 2}}, True, 1),
    ("NW-1", {"hardware": {"cores": 8}, "workload": {"gpus_per_node": 8}}, True, 0),
    ("NW-1", {}, False, ...),
    ("NW-1", {"hardware": {"cores": 64}, "workload": {"consumer_rate": 100.0}}, False, ...),
    ("NW-2", {"hardware": {"ram_available": 1 * GB}}, True, 1),
    ("NW-2", {"hardware": {"ram_available": 0}}, True, 0),
    ("NW-2", {}, False, ...),
    ("NW-2", {"hardware": {"ram_available": None}}, False, ...),
    ("NW-3", {"trial": {}}, True, 8),  # 1.2 x 1,000 samples/s needs the 8-worker point
    ("NW-3", {"trial": {}, "workload": {"consumer_rate": 300.0}}, True, 2),
    ("NW-3", {"trial": {}, "workload": {"consumer_rate": None}}, True, 8),
    ("NW-3", {"trial": {}, "hardware": {"cores": 3}}, True, 2),  # cap 2 within the sweep
    ("NW-3", {"trial": {"rates": {0: 5000.0, 1: 600.0, 2: 1500.0}}}, True, 2),  # 0 overlaps nothing
    (
        "NW-3",
        {
            "trial": {"rates": {0: 5000.0, 1: 600.0}},
            "hardware": {"gpus": 0},
            "workload": {"consumer_rate": None},
        },
        True,
        0,
    ),
    # the last core earns a worker only when measured clearly (> 10%) faster than the cap
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {1: 400.0, 2: 600.0}},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {1: 400.0, 2: 440.0}},
            "workload": {"consumer_rate": None},
        },
        True,
        1,
    ),
    # 0 workers must be clearly (10%) faster than a worker count, else noise would pick it
    (
        "NW-3",
        {
            "trial": {"rates": {0: 500.0, 1: 300.0, 2: 480.0}},
            "hardware": {"gpus": 0},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    # 0 workers is not clearly faster than a worker on every core, so that point is measured
    # against 1 worker: 122 > 1.15 x 103 earns the last core
    (
        "NW-3",
        {
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 114.4, 1: 103.3, 2: 122.2}},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    # with a consumer rate, 0 workers is judged as training sees it: its 3.8 samples/s of
    # loading take turns with the step (3.79/s), not clearly ahead of 2 workers' 4.0, so it is no
    # baseline for the last core either
    (
        "NW-3",
        {"hardware": {"cores": 2}, "trial": {"rates": {0: 3.8, 1: 3.2, 2: 4.0}}},
        True,
        2,
    ),
    # ... but a loader far slower than the consumer loses little to taking turns: 1 / (1/3.5 +
    # 1/40) = 3.22/s is > 10% ahead of 2 workers' 2.7
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {0: 3.5, 1: 2.1, 2: 2.7}},
            "workload": {"consumer_rate": 40.0},
        },
        True,
        0,
    ),
    # 200 MB objects: the main thread spends 10 ms per sample, the step 25 ms, while the reader
    # fetches on: 0 workers keep their 5.8/s (1 / (1/5.8 + 1/40) = 5.07/s if all of it took
    # turns), > 10% ahead of 1 worker's 4.8 and ahead of 2 workers' 5.2
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {0: 5.8, 1: 4.8, 2: 5.2}, "zero_main_cpu": 0.010},
            "workload": {"consumer_rate": 40.0},
        },
        True,
        0,
    ),
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {0: 5.8, 1: 4.8, 2: 5.2}},
            "workload": {"consumer_rate": 40.0},
        },
        True,
        1,
    ),
    # neither 0 workers nor the last core is clearly ahead of the other, but both are of the one
    # worker within cores - 1: not that one (200 MB objects: 1 worker was the slowest every time)
    (
        "NW-3",
        {
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 3.5, 1: 3.0, 2: 3.2}},
            "workload": {"consumer_rate": None},
        },
        True,
        0,
    ),
    # 1 MB objects at 30 ms: the main thread was busy 0.3 ms of each sample's 2 ms at 0 workers,
    # the reader's thread did the loading: 0 workers within 10% of 1 worker is a tie it wins
    (
        "NW-3",
        {
            "profile": ONE_MB,
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 506.0, 1: 528.0, 2: 502.0}, "zero_main_cpu": 0.0003},
            "workload": {"consumer_rate": None},
        },
        True,
        0,
    ),
    # ... a main thread busy most of the time (or not measured): the tie goes to workers
    (
        "NW-3",
        {
            "profile": ONE_MB,
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 506.0, 1: 528.0, 2: 502.0}, "zero_main_cpu": 0.0015},
            "workload": {"consumer_rate": None},
        },
        True,
        1,
    ),
    (
        "NW-3",
        {
            "profile": ONE_MB,
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 506.0, 1: 528.0, 2: 502.0}},
            "workload": {"consumer_rate": None},
        },
        True,
        1,
    ),
    # ... and an I/O-bound 0 workers more than 10% behind a worker count is no tie
    (
        "NW-3",
        {
            "profile": ONE_MB,
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 1195.0, 1: 1184.0, 2: 1574.0}, "zero_main_cpu": 0.0002},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    # 200 MB objects at 30 ms (bench run of 14:40): the main thread was mostly idle at 0 workers
    # and 0 workers came within 10% of 2 (4.3 against 4.7/s), but one object fills most of the
    # reader's 256 MiB byte budget: each worker brings a budget of its own, so the tie goes to
    # workers (the sweep measured 3.5 for 0 workers and 4.5 for 2)
    (
        "NW-3",
        {
            "profile": TWO_HUNDRED_MB,
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 4.3, 1: 3.8, 2: 4.7}, "zero_main_cpu": 0.02},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    (
        "NW-3",
        {
            "profile": TWO_HUNDRED_MB,
            "hardware": {"cores": 2},
            "trial": {"rates": {0: 4.3, 1: 3.8, 2: 4.7}, "zero_main_cpu": 0.02},
            "workload": {"consumer_rate": 40.0},
        },
        True,
        2,
    ),
    # ... 0 workers still wins by a clear lead
    (
        "NW-3",
        {
            "profile": TWO_HUNDRED_MB,
            "hardware": {"cores": 2, "gpus": 0},
            "trial": {"rates": {0: 6.0, 1: 4.6, 2: 5.3}, "zero_main_cpu": 0.02},
            "workload": {"consumer_rate": None},
        },
        True,
        0,
    ),
    # a consumer slower than the loader: 1 / (1/2,812 + 1/40) = 39.4/s against 40/s with a worker
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {0: 2812.0, 1: 1670.0, 2: 1700.0}},
            "workload": {"consumer_rate": 40.0},
        },
        True,
        1,
    ),
    ("NW-3", {"trial": {"rates": {0: 5000.0}}}, False, ...),
    ("NW-3", {}, False, ...),
    ("NW-3", {"trial": {"rates": {}}}, False, ...),
    ("NW-4", {}, True, 5),  # 4 ms x 1,000 samples per shard: 250 samples/s per worker
    ("NW-4", {"trial": {}}, False, ...),
]

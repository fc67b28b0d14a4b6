"""DataLoader num_workers: cases for advisor/decide/rules/workers.py.

"trial": {"rates": {w: r or (r1, r2, ...)}} are the training-loop sweep's slices per count (a
tuple: one slice each); with "spin", those are the blocking step's slices and "spin" the
spinning step's (see tests/decide/test_rules.py's make_trial).
"""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import GB, MB

# 3 tar shards of 300 JPEGs in a local folder on 2 cores (issue 56): 4 ms of CPU per sample
# (make_trial's decode) makes 250 samples/s a worker, about 470 with both cores busy
THREE_SHARDS = {
    "profile": {"count": 3, "size": 31 * MB, "spo": 300, "uri": "/data/train"},
    "hardware": {"cores": 2, "gpus": 0},
    "workload": {"consumer_rate": None},
}

CASES: list[Case] = [
    # the cap is the cores less the training thread's share of one at the predicted rate (its
    # step's duty cycle and the hand-over), rounded up
    ("NW-1", {"hardware": {"cores": 2}}, True, 2),
    ("NW-1", {"hardware": {"cores": 8}, "workload": {"gpus_per_node": 8}}, True, 1),
    ("NW-1", {}, False, ...),
    ("NW-1", {"hardware": {"cores": 64}, "workload": {"consumer_rate": 100.0}}, False, ...),
    ("NW-2", {"hardware": {"ram_available": 1 * GB}}, True, 1),
    ("NW-2", {"hardware": {"ram_available": 0}}, True, 0),
    ("NW-2", {}, False, ...),
    ("NW-2", {"hardware": {"ram_available": None}}, False, ...),
    # without a trial the model decides, within cores - 1 ...
    # ... with one, the cores: the training-loop sweep measured every count up to them
    (
        "NW-1",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {0: 100.0, 1: 200.0, 2: 400.0}},
            "workload": {"consumer_rate": None},
        },
        False,
        ...,
    ),
    ("NW-3", {"trial": {}}, True, 8),  # 1.2 x 1,000 samples/s needs the 8-worker point
    ("NW-3", {"trial": {}, "workload": {"consumer_rate": 300.0}}, True, 2),
    ("NW-3", {"trial": {}, "workload": {"consumer_rate": None}}, True, 8),
    ("NW-3", {"trial": {}, "hardware": {"cores": 3}}, True, 2),  # 4 and 8 exceed the cores
    # 0 workers already delivers 1.2 x the consumer's 1,000 samples/s: the smallest that does
    ("NW-3", {"trial": {"rates": {0: 5000.0, 1: 600.0, 2: 1500.0}}}, True, 0),
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
    # one slice each, no spread: only the best is within the noise (the last core included)
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {1: 400.0, 2: 440.0}},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    # 1 worker's 425 (405-445) is within the noise (its slices stray 20 from its median) of
    # 2 workers' 440 (430-450): the smaller count
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {1: (405.0, 445.0), 2: (430.0, 450.0)}},
            "workload": {"consumer_rate": None},
        },
        True,
        1,
    ),
    # ... but not when both counts' slices agree closely (405 against 445, noise 5)
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {1: (400.0, 410.0), 2: (440.0, 450.0)}},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    # ... nor by more than 5% of the best, however noisy (400, +-100, against 445)
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {1: (300.0, 500.0), 2: (440.0, 450.0)}},
            "workload": {"consumer_rate": None},
        },
        True,
        2,
    ),
    # a count must be good with both step models: 0 workers leads with a blocking step
    # (1,005/s) but a spinning one takes the core its loading needs (605/s, 0.66 of the best);
    # 1 worker scores 0.95 (955/1,005 blocking), within the noise (15/915) of 2 workers' 0.96
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {
                "rates": {0: (1000.0, 1010.0), 1: (950.0, 960.0), 2: (960.0, 970.0)},
                "spin": {0: (600.0, 610.0), 1: (900.0, 910.0), 2: (900.0, 930.0)},
            },
        },
        True,
        1,
    ),
    # ... and 2 workers when 1 keeps up with a spinning step but not with a blocking one, where
    # the second worker decodes on the core the step leaves free (6 ms of CPU per sample)
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {
                "rates": {0: (150.0, 155.0), 1: (160.0, 170.0), 2: (320.0, 330.0)},
                "spin": {0: (80.0, 85.0), 1: (160.0, 170.0), 2: (160.0, 170.0)},
            },
        },
        True,
        2,
    ),
    # a consumer slower than every count: all deliver it, within the noise of each other
    (
        "NW-3",
        {
            "hardware": {"cores": 2},
            "trial": {"rates": {0: (39.3, 39.7), 1: (39.5, 39.7), 2: (39.4, 39.8)}},
            "workload": {"consumer_rate": 40.0},
        },
        True,
        0,
    ),
    # the RAM allows no worker and only worker counts were measured: the model decides (NW-4)
    (
        "NW-3",
        {"trial": {"rates": {1: 600.0, 2: 900.0}}, "hardware": {"ram_available": 0}},
        False,
        ...,
    ),
    ("NW-3", {}, False, ...),
    ("NW-3", {"trial": {"rates": {}}}, False, ...),
    ("NW-4", {}, True, 5),  # 4 ms x 1,000 samples per shard: 250 samples/s per worker
    # 4 shards a pass: a fifth worker would be dealt none, so no more than 4 (it was 5)
    ("NW-4", {"profile": {"count": 4, "size": 150 * MB}}, True, 4),
    ("NW-4", {"trial": {}}, False, ...),
    # NW-5: 3 shards over 2 workers are dealt 2 + 1, and the last shard of each epoch is read
    # on one core; 3 workers share both to the epoch's end: 463 samples/s (the decode ceiling
    # measured with 2 busy, 469, less each epoch's first byte) against the 372 measured with 2
    (
        "NW-5",
        {**THREE_SHARDS, "trial": {"rates": {0: 240.0, 1: 245.0, 2: 372.0}}},
        True,
        3,
    ),
    # ... not where the measured count already reads faster than 3 would (the model's 456)
    (
        "NW-5",
        {**THREE_SHARDS, "trial": {"rates": {0: 240.0, 1: 245.0, 2: 617.0}}},
        False,
        ...,
    ),
    # the model alone (NW-4 chose 2 of 2 cores): 460 predicted with 3 against 374 with 2
    (
        "NW-5",
        {"profile": {"count": 3}, "hardware": {"cores": 2}, "workload": {"consumer_rate": None}},
        True,
        3,
    ),
    # per rank: 6 shards over 2 ranks of 2 workers are 3 a rank, dealt 2 + 1
    (
        "NW-5",
        {
            "profile": {"count": 6},
            "hardware": {"cores": 4},
            "workload": {"gpus_per_node": 2, "consumer_rate": None},
        },
        True,
        3,
    ),
    # RAM for 2 workers only (400 MB each): re-shard into a multiple of the 2 readers, 4 shards
    (
        "NW-5",
        {
            "profile": {"count": 3},
            "hardware": {"cores": 2, "ram_available": 1_100 * MB},
            "workload": {"consumer_rate": None},
        },
        True,
        4,
    ),
    # the same, 3 objects of one sample each: a re-shard packs whole samples, so no layout
    # deals 3 samples to 2 workers better than 2 + 1 (it advised 4 "shards" of 3 samples)
    (
        "NW-5",
        {
            "profile": {"count": 3, "spo": 1, "size": 100_000},
            "hardware": {"cores": 2, "ram_available": 1_100 * MB},
            "workload": {"consumer_rate": None},
        },
        False,
        ...,
    ),
    # dealt evenly: 4 shards over 2 workers
    (
        "NW-5",
        {"profile": {"count": 4}, "hardware": {"cores": 2}, "workload": {"consumer_rate": None}},
        False,
        ...,
    ),
    # 1,000 shards over 16 workers are dealt unevenly, at no cost beyond the noise
    ("NW-5", {"hardware": {"cores": 16}, "workload": {"consumer_rate": None}}, False, ...),
    # one core: one process reads every shard
    (
        "NW-5",
        {"profile": {"count": 3}, "hardware": {"cores": 1}, "workload": {"consumer_rate": None}},
        False,
        ...,
    ),
    # a GPU that takes 300 samples/s: no count reads more of it
    (
        "NW-5",
        {"profile": {"count": 3}, "hardware": {"cores": 2}, "workload": {"consumer_rate": 300.0}},
        False,
        ...,
    ),
]

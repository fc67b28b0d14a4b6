"""prefetch_factor, /dev/shm and pin_memory: cases for advisor/decide/rules/batches.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import GB, MB

MiB = 2**20
TARGET = {"cores": 16, "shm_bytes": 64 * GB}  # a node with a large /dev/shm of its own

OTHER_SETUP = {
    "batch_size": 64,
    "consumer_rate": 1000.0,
    "gpus_per_node": 1,
    "transform": None,
    "usable_cores": 16,
}

CASES: list[Case] = [
    # one core held by a step the loader keeps up with (100/s): no worker, no prefetch
    ("PF-1", {"hardware": {"cores": 1}, "workload": {"consumer_rate": 100.0}}, True, None),
    ("PF-1", {}, False, ...),
    ("PF-2", {}, True, 2),
    # the prefetch the trial measured the chosen count with, where its rates hold
    ("PF-2", {"trial": {"prefetch": 5}}, True, 5),
    # a trial under another setup (batch 64): its rates do not hold, the formula with the
    # measured first-byte p95: 60 ms at the predicted rate per worker spans many batches of 1
    ("PF-2", {"workload": {"batch_size": 1}, "trial": {"setup": OTHER_SETUP}}, True, 8),
    ("PF-2", {"hardware": {"cores": 1}, "workload": {"consumer_rate": 100.0}}, False, ...),
    # Docker's default 64 MiB /dev/shm, all of it free: 5 workers x 2 batches of 4.6 MiB are
    # more than half of it; 1 batch each fits
    ("PF-2", {"hardware": {"shm": 64 * MiB, "shm_free": 64 * MiB}}, True, 1),
    # a large /dev/shm with little of it free (other processes hold the rest): the free bytes
    ("PF-2", {"hardware": {"shm": 32 * GB, "shm_free": 40 * MiB}}, True, 1),
    # the measured prefetch (8 workers x 5 batches of 4.6 MiB), lowered as well
    (
        "PF-2",
        {"trial": {"prefetch": 5}, "hardware": {"shm": 2**30, "shm_free": 200 * MiB}},
        True,
        2,
    ),
    # a target machine's /dev/shm (its size, a fresh machine's is empty), not this one's free
    ("PF-2", {"hardware": {"shm_free": 40 * MiB, "target": TARGET}}, True, 2),
    # not even 1 batch per worker fits: 1, the least, and SHM-1 says what to change
    ("PF-2", {"hardware": {"shm": 64 * MiB}, "profile": {"size": 150 * MB, "spo": 1}}, True, 1),
    # the size as probed, free bytes not (a profile from before they were): the size
    (
        "SHM-1",
        {"hardware": {"shm": 64 * 2**20}, "profile": {"size": 150 * MB, "spo": 1}},
        True,
        "--shm-size=36g",
    ),
    # the free bytes, not the size: 5 workers x 2 batches of 4.6 MiB in 64 MiB free, the rest
    # of 32 GB held by others (30 GiB keeps 2)
    ("SHM-1", {"hardware": {"shm": 32 * GB, "shm_free": 64 * MiB}}, True, "--shm-size=30g"),
    ("SHM-1", {"hardware": {"shm": 64 * MiB, "shm_free": 64 * MiB}}, True, "--shm-size=1g"),
    ("SHM-1", {}, False, ...),
    ("SHM-1", {"hardware": {"shm": 2**30, "shm_free": 2**30}}, False, ...),
    ("SHM-1", {"hardware": {"shm_free": 40 * MiB, "target": TARGET}}, False, ...),
    # no workers: nothing in flight ...
    (
        "SHM-1",
        {"hardware": {"cores": 1, "shm": 1}, "workload": {"consumer_rate": 100.0}},
        False,
        ...,
    ),
    # ... unless the trial could not measure a count because /dev/shm could not hold its batches
    (
        "SHM-1",
        {
            "hardware": {"cores": 1, "shm": 64 * MiB, "shm_free": 4 * MiB},
            "workload": {"consumer_rate": 100.0},
            "trial": {"rates": {0: 200.0}, "shm_refused": (1,)},
        },
        True,
        "--shm-size=1g",
    ),
    ("PIN-1", {"hardware": {"gpus": 0}}, True, False),
    ("PIN-1", {}, False, ...),
    ("PIN-2", {"trial": {"pinned": 10.5, "pageable": 10.0}}, True, False),
    ("PIN-2", {"trial": {}}, False, ...),
    ("PIN-2", {"trial": {"pinned": 10.0, "pageable": 10.0}, "hardware": {"gpus": 0}}, False, ...),
    ("PIN-3", {"hardware": {"ram_available": 2 * GB}, "profile": {"spo": 1}}, True, False),
    ("PIN-3", {}, False, ...),
    ("PIN-4", {}, True, True),
    ("PIN-4", {"trial": {}}, True, True),
    ("PIN-4", {"hardware": {"gpus": 0}}, False, ...),
]

"""prefetch_factor, /dev/shm and pin_memory: cases for advisor/decide/rules/batches.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import GB, MB

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
    (
        "SHM-1",
        {"hardware": {"shm": 64 * 2**20}, "profile": {"size": 150 * MB, "spo": 1}},
        True,
        ...,
    ),
    ("SHM-1", {}, False, ...),
    (
        "SHM-1",
        {"hardware": {"cores": 1, "shm": 1}, "workload": {"consumer_rate": 100.0}},
        False,
        ...,
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

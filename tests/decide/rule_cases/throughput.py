"""Expected throughput and input-bound: cases for advisor/decide/rules/throughput.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import SMALL_SET

CASES: list[Case] = [
    ("MEAS-1", {"trial": {}}, True, 1500.0),
    ("MEAS-1", {}, False, ...),
    ("MEAS-1", {"trial": {}, "profile": SMALL_SET, "workload": {"epochs": 5}}, False, ...),
    ("MEAS-2", {}, True, ...),
    ("MEAS-2", {"trial": {}}, False, ...),
    ("MEAS-3", {"workload": {"consumer_rate": 100_000.0}}, True, True),
    ("MEAS-3", {}, False, ...),
    # measured in the training loop, 1% under the consumer: the loop's own work, it keeps up
    (
        "MEAS-3",
        {"trial": {"rates": {0: 990.0, 1: 985.0}}, "workload": {"consumer_rate": 1000.0}},
        False,
        ...,
    ),
    (
        "MEAS-3",
        {"trial": {"rates": {0: 900.0, 1: 930.0}}, "workload": {"consumer_rate": 1000.0}},
        True,
        True,
    ),
    ("MEAS-3", {"workload": {"consumer_rate": None}}, False, ...),
    ("MEAS-4", {"workload": {"consumer_rate": 100_000.0}}, True, "preprocess-offline"),
    ("MEAS-4", {}, False, ...),
    ("MEAS-4", {"profile": {"fmt": "text"}, "workload": {"consumer_rate": 1e7}}, False, ...),
    # measured: 8 workers read 1,900 samples/s against the 2,000 that 4 ms of CPU per sample on
    # 8 loading cores allow: decoding is what limits the loader
    (
        "MEAS-4",
        {
            "trial": {"rates": {0: 230.0, 1: 250.0, 2: 480.0, 4: 950.0, 8: 1900.0}},
            "workload": {"consumer_rate": 100_000.0},
        },
        True,
        "preprocess-offline",
    ),
    # measured 400 samples/s where decoding allows 2,000 (five times more): something else
    # limits the loader, so "move decode offline" would contradict the measurements
    (
        "MEAS-4",
        {
            "trial": {"rates": {0: 100.0, 1: 150.0, 2: 250.0, 4: 350.0, 8: 400.0}},
            "workload": {"consumer_rate": 100_000.0},
        },
        False,
        ...,
    ),
]

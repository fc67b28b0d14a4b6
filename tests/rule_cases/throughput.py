"""Expected throughput and input-bound: cases for advisor/decide/rules/throughput.py."""

from rule_cases import Case
from rule_cases.common import SMALL_SET

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
]

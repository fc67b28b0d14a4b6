"""The native reader's settings: cases for advisor/decide/rules/reader.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import GB, LOCAL, MB, ONE_MB, SMALL_STREAM, TWO_HUNDRED_MB

CASES: list[Case] = [
    ("RD-1", {}, True, 32),  # 150 MB shards: parts, bounded by the byte budget
    # 600 objects/s x 31.1 ms x 2 = 37.3 -> 38 requests in flight
    ("RD-1", {**SMALL_STREAM, "workload": {"consumer_rate": 500.0}}, True, 38),
    # 3,000/s x 2 x 31.1 ms = 186.7
    ("RD-1", {**SMALL_STREAM, "workload": {"consumer_rate": None}}, True, 187),
    ("RD-1", {"trial": {"inflight": 96}}, True, 96),  # what the trial's sweep measured with
    # a measured 4 ms transform: one process takes in 250 objects/s, not 3,000; at the probed
    # 25 ms + 1.2 ms, 2 x 250 x 26.2 ms = 13.1 -> the reader's default
    ("RD-1", {**SMALL_STREAM, "workload": {"consumer_rate": None}, "trial": {}}, True, 32),
    # 2 MB objects: a process takes in 1,000 MB/s, 500 objects/s x (30 + 22.2 ms) x 2 = 52.2 -> 53
    (
        "RD-1",
        {
            "profile": {"count": 5000, "size": 2 * MB, "fmt": "jpeg", "spo": None},
            "hardware": {"disk_free": 0},
            "workload": {"consumer_rate": None},
        },
        True,
        53,
    ),
    ("RD-1", {"profile": LOCAL, "data_fs": "xfs"}, False, ...),
    # 200 MB objects: the default 256 MiB holds one; 4 of them in whole 8 MiB parts = 768 MiB
    ("RD-2", {"profile": TWO_HUNDRED_MB}, True, 768 * 2**20),
    # ... the budget the trial's sweep read with
    ("RD-2", {"profile": TWO_HUNDRED_MB, "trial": {"budget": 1024 * 2**20}}, True, 1024 * 2**20),
    # ... 17 processes' budgets within a quarter of 8 GB: 117 MB each, so the default stays
    ("RD-2", {"profile": TWO_HUNDRED_MB, "hardware": {"ram_available": 8 * GB}}, False, ...),
    ("RD-2", {"profile": ONE_MB}, False, ...),  # 256 MiB holds 268 of them
    # streamed shards (tar samples, text records) are never held whole: the default holds their
    # read-ahead, whatever their size
    ("RD-2", {"profile": {"size": 200 * MB}}, False, ...),
    ("RD-2", {"profile": {**TWO_HUNDRED_MB, "fmt": "jsonl", "records": "jsonl"}}, False, ...),
    # 20 GB read 3 times: copy-local, where the reader's default applies
    ("RD-2", {"profile": {**TWO_HUNDRED_MB, "count": 100}, "workload": {"epochs": 3}}, False, ...),
]

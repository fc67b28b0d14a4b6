"""Data source: cases for advisor/decide/rules/source.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import (
    GB,
    HUGE_LARGE,
    HUGE_SMALL,
    LOCAL,
    MB,
    SMALL_FILES,
    SMALL_SET,
)

CASES: list[Case] = [
    ("SRC-1", {"workload": {"data_location": "efs"}}, True, "efs"),
    ("SRC-1", {"profile": {"uri": "/mnt/efs/train"}, "data_fs": "nfs4"}, True, "efs"),
    # an SMB mount (no URI names a network file system: nfs:// and efs:// are refused at the
    # profile, `native_loader.uri.parse_uri`; a mount is found by its file system type)
    ("SRC-1", {"profile": {"uri": "/mnt/share/train"}, "data_fs": "cifs"}, True, "efs"),
    ("SRC-1", {"workload": {"data_location": "fsx"}}, True, "shared-fs"),
    ("SRC-1", {}, False, ...),
    ("SRC-1", {"profile": LOCAL, "data_fs": "ext4"}, False, ...),
    ("SRC-2", {"profile": LOCAL, "data_fs": "xfs"}, True, "copy-local"),
    ("SRC-2", {}, False, ...),
    ("SRC-2", {"profile": LOCAL, "data_fs": "nfs"}, False, ...),
    ("ORC-1", {"profile": HUGE_SMALL}, True, "shared-fs"),
    ("ORC-1", {"profile": HUGE_LARGE, "workload": {"nodes": 4}}, True, "shared-fs"),
    ("ORC-1", {"profile": HUGE_LARGE}, False, ...),
    ("ORC-1", {"profile": SMALL_FILES, "workload": {"nodes": 4}}, False, ...),
    ("SRC-3", {"profile": SMALL_FILES}, True, "reshard-first"),
    ("SRC-3", {"profile": {**SMALL_FILES, "count": 50_000}}, False, ...),
    ("SRC-3", {"profile": {"count": 1_000_000, "size": 5 * MB}}, False, ...),
    ("SRC-4", {"profile": SMALL_SET, "workload": {"epochs": 5}}, True, "copy-local"),
    ("SRC-4", {"profile": {"count": 2000, "size": 5 * MB}}, True, "copy-local"),
    ("SRC-4", {"profile": SMALL_SET}, False, ...),  # one pass over large shards: stream
    ("SRC-4", {"profile": {"count": 3000}, "workload": {"epochs": 5}}, False, ...),  # 450 GB
    (
        "SRC-4",
        {"profile": SMALL_SET, "workload": {"epochs": 5}, "hardware": {"disk_free": GB}},
        False,
        ...,
    ),
    ("SRC-4", {"profile": {**SMALL_SET, **LOCAL}, "workload": {"epochs": 5}}, False, ...),
    ("SRC-5", {}, True, "stream"),
    ("SRC-5", {"profile": SMALL_SET}, True, "stream"),
    ("SRC-5", {"profile": LOCAL}, False, ...),
    ("SRC-5", {"workload": {"data_location": "efs"}}, False, ...),
    ("SRC-6", {"profile": SMALL_FILES}, True, "stream"),
    (
        "SRC-6",
        {"profile": {**SMALL_FILES, "count": 200_000}, "workload": {"epochs": 5}},
        True,
        "copy-local",
    ),
    ("SRC-6", {}, False, ...),
    ("SRC-7", {"workload": {"data_location": "efs"}}, True, "provisioned-throughput"),
    ("SRC-7", {"workload": {"data_location": "efs", "consumer_rate": 10.0}}, False, ...),
    ("SRC-7", {"workload": {"data_location": "efs", "consumer_rate": None}}, False, ...),
    ("SRC-7", {}, False, ...),
    ("CACHE-1", {"workload": {"epochs": 3}}, True, True),
    (
        "CACHE-1",
        {"profile": {**SMALL_FILES, "count": 5_000_000}, "workload": {"epochs": 3}},
        True,
        True,
    ),
    ("CACHE-1", {}, False, ...),
    ("CACHE-1", {"workload": {"epochs": 3}, "hardware": {"disk_free": 10 * GB}}, False, ...),
    ("CACHE-1", {"profile": SMALL_SET, "workload": {"epochs": 3}}, False, ...),  # copy-local
]

"""Test infrastructure shared by `tests/` and `bench/`; not part of the installed package.

`FaultProxy` injects faults between an S3 client and the local S3 server (see `faults`);
`synthetic_s3.SyntheticS3` serves a bucket of computed keys (millions, no storage) for the
scale benchmark; `die_with_parent` keeps helper processes from outliving the test or benchmark
that started them.
"""

from __future__ import annotations

from advisor.demo.server import die_with_parent
from testing.faults import FaultKind, FaultProxy, Faults, FaultStats, When, slow_down_response

__all__ = [
    "FaultKind",
    "FaultProxy",
    "FaultStats",
    "Faults",
    "When",
    "die_with_parent",
    "slow_down_response",
]

"""advisor.core.units: the one place sizes, rates and durations are formatted for people."""

from __future__ import annotations

import pytest

from advisor.core.units import (
    any_size,
    binary_size,
    counted,
    data_rate,
    data_size,
    duration,
    exact_bytes,
    mb_per_s,
    per_s,
    rate,
    share,
)


def test_counts_read_as_words() -> None:
    assert counted(1, "worker") == "1 worker" and counted(2, "worker") == "2 workers"
    assert counted(0, "worker") == "0 workers" and counted(12_000, "object") == "12,000 objects"
    assert counted(1, "prefix", "prefixes") == "1 prefix"
    assert counted(16, "prefix", "prefixes") == "16 prefixes"
    assert counted(1.5, "batch", "batches") == "1.5 batches"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 B"),
        (12, "12 B"),
        (1536, "1.5 KiB"),
        (64 * 2**20, "64 MiB"),
        (252.9e6, "241 MiB"),  # the demo's images: the same figure in the CLI and the wizard
        (3 * 2**40, "3.0 TiB"),
        (1500 * 2**30, "1.5 TiB"),
        (20.3 * 2**20, "20 MiB"),
    ],
)
def test_data_size_is_binary_and_rounded_for_people(value: float, shown: str) -> None:
    assert data_size(value) == shown
    assert binary_size(value) == any_size(value) == shown  # one formatter under every name


@pytest.mark.parametrize(
    ("bytes_per_s", "shown"),
    [
        (2_180.4e6, "2,079 MiB/s"),
        (12.44e6, "12 MiB/s"),
        (4.44e6, "4.2 MiB/s"),
        (4e5, "0.4 MiB/s"),
        (25 * 2**30, "25 GiB/s"),
    ],
)
def test_data_rate_is_binary_mib_per_s_as_sizes_are(bytes_per_s: float, shown: str) -> None:
    assert data_rate(bytes_per_s) == shown
    assert mb_per_s(bytes_per_s / 1e6) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"),
        (0.0004, "400 µs"),
        (0.00183, "1.8 ms"),
        (0.120, "120 ms"),
        (1.31, "1.3 s"),
        (42.2, "42 s"),
        (250, "4 min 10 s"),
        (720, "12 min"),
        (7500, "2 h 5 min"),
    ],
)
def test_duration_for_people(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_rates_shares_and_exact_bytes() -> None:
    assert per_s(1234.5) == "1,234" and per_s(4.33) == "4.3"
    assert rate(2180.2) == "2,180 samples/s" and rate(3.25, "objects") == "3.2 objects/s"
    assert share(0.153) == "15%" and share(0.004) == "0.4%" and share(0) == "0%"
    assert exact_bytes(63_217_510) == "63,217,510 B (60 MiB)" and exact_bytes(12) == "12 B"

"""advisor.core.units: the one place sizes and rates are formatted."""

from __future__ import annotations

import pytest

from advisor.core.units import any_size, binary_size, gb, per_s, size


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2.5e9, "2.5 GB"),
        (2_000e9, "2,000.0 GB"),
        (150e6, "150.0 MB"),
        (5e5, "0.5 MB"),
        (0, "0.0 MB"),
    ],
)
def test_gb_is_how_rationales_give_sizes(value: float, shown: str) -> None:
    assert gb(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(3e12, "3.0 TB"), (1.5e9, "1.5 GB"), (2e6, "2.0 MB"), (1500, "1.5 KB"), (999, "999 B")],
)
def test_any_size_takes_the_largest_unit(value: float, shown: str) -> None:
    assert any_size(value) == shown


def test_size_with_chosen_units_and_digits() -> None:
    assert size(150e6, ("MB", "KB"), 0) == "150 MB"
    assert size(5e5, ("MB", "KB"), 0) == "500 KB"
    assert size(10, ("MB", "KB"), 0) == "0 KB"  # below the last unit: still in it
    with pytest.raises(ValueError):
        size(1, ())


def test_binary_size_and_rates() -> None:
    assert binary_size(1536) == "1.5 KiB" and binary_size(100 * 2**20) == "100 MiB"
    assert binary_size(12) == "12 B"
    assert per_s(1234.5) == "1,234" and per_s(4.33) == "4.3"

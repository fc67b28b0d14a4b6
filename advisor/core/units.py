"""Units and their formatting: the one home of byte and time units for the whole package.

Sizes are decimal (1 MB = 10**6 bytes) as storage and network rates are quoted, except where a
setting is binary by nature (the reader's byte budget, in MiB; `binary_size`).
"""

from __future__ import annotations

from collections.abc import Sequence

KB = 1_000
MB = 1_000_000
GB = 1_000_000_000
TB = 1_000_000_000_000
KIB = 2**10
MIB = 2**20
GIB = 2**30

_DECIMAL = {"TB": TB, "GB": GB, "MB": MB, "KB": KB, "B": 1}


def size(n: float, units: Sequence[str] = ("GB", "MB"), digits: int = 1) -> str:
    """`n` bytes in the largest of `units` (largest first) it reaches, else the last one.

    size(2.5e9) -> "2.5 GB"; size(5e5) -> "0.5 MB"; size(5e5, ("MB", "KB"), 0) -> "500 KB".
    """
    for unit in units:
        if n >= _DECIMAL[unit] or unit == units[-1]:
            return f"{n / _DECIMAL[unit]:,.{digits}f} {unit}"
    raise ValueError("no units given")


def gb(n: float) -> str:
    """Bytes as GB from 1 GB up, else MB, one decimal: how the rules' rationales give sizes."""
    return size(n, ("GB", "MB"))


def any_size(n: float) -> str:
    """Bytes in the largest decimal unit from KB to TB that it reaches, else bytes."""
    return size(n, ("TB", "GB", "MB", "KB", "B"), 1) if n >= KB else f"{n:,.0f} B"


def binary_size(n: float) -> str:
    """1536 -> "1.5 KiB"; powers of 1024, one decimal below 10 units."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(value)} B"
            return f"{value:.1f} {unit}" if abs(value) < 10 else f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.0f} TiB"  # pragma: no cover - the loop always returns


def per_s(rate: float) -> str:
    """A rate without a wall of digits: whole numbers from 100 up, else one decimal."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"


def exact_bytes(n: int) -> str:
    """A byte count in full, with thousands separators: 1234567 -> "1,234,567 B"."""
    return f"{n:,} B"

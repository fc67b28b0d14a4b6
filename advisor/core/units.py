"""Units and their formatting: the one home of byte, rate and time units for the whole package.

What people read (the CLI, the wizard, the exported module's comments) goes through one set of
formatters, rounded for people: `data_size` ("241 MiB"), `data_rate` ("2,079 MiB/s"), `duration`
("1.3 s", "4 min 10 s"), `per_s` and `rate` ("1,234 samples/s"), `share` ("15%"). One unit
system in every line: sizes and rates of data are binary (KiB, MiB, GiB; MiB/s), as operating
systems and file browsers show files and memory. So a copy reads "241 MiB, about 7 s at the
measured 35 MiB/s", never MiB beside MB/s. (Sources quoted in rule docstrings keep their units.)

Counts of things read as words do: `counted(2, "worker")` -> "2 workers", never "worker(s)".
"""

from __future__ import annotations

KB = 1_000
MB = 1_000_000
GB = 1_000_000_000
TB = 1_000_000_000_000
KIB = 2**10
MIB = 2**20
GIB = 2**30

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _round(value: float) -> str:
    """As people read figures: one decimal below 10 (1.3), whole numbers above (42, 241, 2,180)."""
    return f"{value:.1f}" if abs(value) < 10 else f"{value:,.0f}"


def data_size(n: float) -> str:
    """Bytes in binary units: 12 -> "12 B"; 1536 -> "1.5 KiB"; 252.9e6 -> "241 MiB"."""
    value = float(n)
    for unit in _BINARY:
        if abs(value) < 1024 or unit == _BINARY[-1]:
            if unit == "B":
                return f"{int(value):,} B"
            return f"{_round(value)} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns


def binary_size(n: float) -> str:
    """The same as `data_size` (its older name)."""
    return data_size(n)


def data_rate(bytes_per_s: float) -> str:
    """Bytes per second in binary MiB/s (GiB/s from 10 GiB/s up), as `data_size` gives sizes:
    2,180.4e6 -> "2,079 MiB/s", 4e5 -> "0.4 MiB/s"."""
    if bytes_per_s >= 10 * GIB:
        return f"{_round(bytes_per_s / GIB)} GiB/s"
    return f"{_round(bytes_per_s / MIB)} MiB/s"


def mb_per_s(mb_s: float) -> str:
    """A rate measured in MB/s (10^6 bytes), said in MiB/s: 2180.4 -> "2,079 MiB/s"."""
    return data_rate(mb_s * MB)


def duration(seconds: float) -> str:
    """Seconds for people: "0.8 ms", "120 ms", "1.3 s", "42 s", "4 min 10 s", "2 h 5 min"."""
    s = float(seconds)
    if s < 0.001:
        return f"{s * 1e6:.0f} µs" if s else "0 s"
    if s < 1:
        return f"{_round(s * 1000)} ms"
    if s < 60:
        return f"{_round(s)} s"
    if s < 3600:
        minutes, rest = divmod(round(s), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(round(s / 60), 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def per_s(rate: float) -> str:
    """A rate's number without a wall of digits: whole numbers from 100 up, else one decimal."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"


def rate(value: float, what: str = "samples") -> str:
    """A count per second with its unit: rate(1234.5) -> "1,234 samples/s"."""
    return f"{per_s(value)} {what}/s"


def share(fraction: float) -> str:
    """A fraction as a percentage: 0.153 -> "15%"; below 1% one decimal."""
    percent = fraction * 100
    return f"{percent:.1f}%" if 0 < abs(percent) < 1 else f"{percent:.0f}%"


def exact_bytes(n: int) -> str:
    """A byte count in full, then for people: 63217510 -> "63,217,510 B (60 MiB)"."""
    return f"{n:,} B" if abs(n) < 1024 else f"{n:,} B ({data_size(n)})"


def any_size(n: float) -> str:
    """Bytes for people: the same as `data_size` (binary), so the CLI and the wizard agree."""
    return data_size(n)


def counted(n: float, noun: str, plural: str | None = None) -> str:
    """`n` of `noun` as people write it: counted(1, "worker") -> "1 worker"; counted(2,
    "prefix", "prefixes") -> "2 prefixes"; counted(12000, "object") -> "12,000 objects"."""
    many = plural if plural is not None else noun + "s"
    whole = float(n).is_integer()
    number = f"{int(n):,}" if whole else f"{n:,.1f}"
    return f"{number} {noun if whole and abs(n) == 1 else many}"

"""The one home of every user-settable bound: each lives on a field of a frozen config.

A field declares its default and range with `bounded(...)`; `check_ranges(self)` in the config's
`__post_init__` rejects a value outside it with a message that names the field and the range.
The CLI builds its argparse types from the same field (`arg_type`), the wizard its widget limits
and inline errors (`range_of`), so a bad value is refused before any work starts, everywhere
with the same words.
"""

from __future__ import annotations

import argparse
import keyword
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Range:
    """`[low, high]`, or `(low, high]` when `low_open`; `kind` is int or float; `unit` is what
    the numbers count ("s", "samples/s", "GPUs"; "" when they are a plain share or a port).

    `str()` reads for people and holds numbers a user can type back: "from 2 to 3,600 s",
    "more than 0 and at most 10,000,000 samples/s".
    """

    low: float
    high: float
    kind: type[int] | type[float] = float
    low_open: bool = False
    unit: str = ""

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return False
        if self.kind is int and not float(value).is_integer():
            return False
        above_low = value > self.low if self.low_open else value >= self.low
        return above_low and value <= self.high

    def __str__(self) -> str:
        low, high = _plain(self.low), _plain(self.high) + (f" {self.unit}" if self.unit else "")
        if self.low_open:
            return f"more than {low} and at most {high}"
        return f"from {low} to {high}"

    def parse(self, text: str, name: str) -> Any:
        """`text` as a number in this range, else ValueError naming `name`, the range and text."""
        noun = "a whole number" if self.kind is int else "a number"
        try:
            value = self.kind(text.strip().replace(",", ""))
        except ValueError:
            raise ValueError(f"{name} must be {noun} {self}, got {text!r}") from None
        if value not in self:
            raise ValueError(f"{name} must be {self}, got {text.strip()}")
        return value


def _plain(number: float) -> str:
    """10,000,000 rather than 1e+07: a bound a user can read and type back (parse takes the
    commas)."""
    return f"{int(number):,}" if float(number).is_integer() else f"{number:,g}"


def bounded(
    default: Any, low: float, high: float, *, low_open: bool = False, unit: str = ""
) -> Any:
    """A dataclass field with `default` and its range (int when the default is an int)."""
    kind: type[int] | type[float] = int if isinstance(default, int) else float
    return field(default=default, metadata={"range": Range(low, high, kind, low_open, unit)})


def range_of(config: type, name: str) -> Range:
    """The range declared on field `name` of the config class `config`."""
    for f in fields(config):
        if f.name == name and "range" in f.metadata:
            return f.metadata["range"]
    raise KeyError(f"{config.__name__}.{name} declares no range")


def check_ranges(config: Any) -> None:
    """Raise ValueError for the first bounded field of `config` outside its range (None passes:
    it means "not given")."""
    for f in fields(config):
        bound = f.metadata.get("range")
        value = getattr(config, f.name)
        if bound is not None and value is not None and value not in bound:
            raise ValueError(f"{f.name}={value!r} must be {bound}")


def arg_type(bound: Range, flag: str) -> Callable[[str], Any]:
    """An argparse `type=` for `flag` that parses `bound.kind` and checks the range."""

    def parse(text: str) -> Any:
        try:
            return bound.parse(text, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = bound.kind.__name__  # argparse names the type in its own messages
    return parse


def check_module_name(stem: str) -> str:
    """`stem` when it can name an importable Python module, else ValueError saying why.

    An export writes `<stem>.py`; the user imports it by that name, so a keyword (`class`) or a
    name that is not an identifier (`my-loader`) makes a module nobody can import.
    """
    if not stem.isidentifier():
        raise ValueError(
            f"export name {stem!r} must be a valid Python module name "
            "(letters, digits and _, not starting with a digit)"
        )
    if keyword.iskeyword(stem):
        raise ValueError(
            f"export name {stem!r} must be a valid Python module name, not a Python keyword"
        )
    return stem


def module_path_type(flag: str) -> Callable[[str], Any]:
    """An argparse `type=` for `flag`, a path whose stem must be a module name (checked before
    any work starts, like every other input)."""

    def parse(text: str) -> Path:
        path = Path(text)
        try:
            check_module_name(path.stem)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{flag}: {exc}") from None
        return path

    parse.__name__ = "path"
    return parse


@dataclass(frozen=True)
class TrialBudget:
    """How long the live trial may run.

    seconds: wall-clock budget for the whole trial, in seconds (default 30). Below 2 s it cannot
        time one DataLoader point; an hour is far past what a short trial is for.
    """

    seconds: float = bounded(30.0, 2, 3600, unit="s")

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class ListingLimits:
    """How much of a data set the profile lists.

    max_keys: keys listed at most (default 200,000); beyond it the profile extrapolates.
    """

    max_keys: int = bounded(200_000, 1, 1_000_000_000, unit="keys")

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class LoopLimits:
    """How long `diagnose` runs a loader in its training loop, and how long it waits for one.

    max_batches: batches at most, the first included (default 300).
    max_seconds: seconds of looping at most after the first batch (default 30).
    first_batch_timeout_s: the wait for the first batch (workers start, files open) before the
        loader is reported as hung (default 120 s).
    batch_timeout_s: the wait for any later batch before the loader is reported as hung
        (default 60 s, as the trial's DataLoader timeout).
    replay_batches: batches kept in memory to replay the step with loading free (default 16).
    """

    max_batches: int = bounded(300, 2, 1_000_000, unit="batches")
    max_seconds: float = bounded(30.0, 0.5, 3600, unit="s")
    first_batch_timeout_s: float = bounded(120.0, 0.5, 3600, unit="s")
    batch_timeout_s: float = bounded(60.0, 0.5, 3600, unit="s")
    replay_batches: int = bounded(16, 0, 1000, unit="batches")

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class CompareRounds:
    """rounds: interleaved runs of each loader when two are compared (default 2): the ratio's
    spread comes from them."""

    rounds: int = bounded(2, 1, 20, unit="rounds")

    def __post_init__(self) -> None:
        check_ranges(self)

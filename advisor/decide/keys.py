"""The values the rules decide (`Key`), the decisions a recommendation reports (`DecisionKind`),
the state the rules build (`State`) and what one rule concludes (`Finding`, with its
`Confidence`): the vocabulary below `context` and `base`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from advisor.core.units import counted, data_size, rate

# "high": a trial measurement or a hard fact; "medium": a rule on the profile, or the model fed
# with measured inputs; "low": the model with default numbers only (docs/decision-flow.md)
Confidence = Literal["high", "medium", "low"]


class Key(str, Enum):
    """The values the rules decide; a rule sets at most one, and the first to set it wins."""

    DATA_SOURCE = "data_source"
    AFTER_RESHARD = "after_reshard"
    CACHE_LOCALLY = "cache_locally"
    REQUESTS_IN_FLIGHT = "requests_in_flight"
    INFLIGHT_BYTES = "inflight_bytes"
    WORKERS_CAP_CORES = "workers_cap_cores"
    WORKERS_CAP_RAM = "workers_cap_ram"
    NUM_WORKERS = "num_workers"
    PREFETCH_FACTOR = "prefetch_factor"
    PIN_MEMORY = "pin_memory"
    SHARD_SIZE_BYTES = "shard_size_bytes"
    PREFIX_LAYOUT = "prefix_layout"
    EXPECTED_SAMPLES_PER_S = "expected_samples_per_s"
    INPUT_BOUND = "input_bound"


# How a decision's value reads for people, given the decision's unit.
Format = Callable[[Any, str], str]


def _plain(value: Any, unit: str) -> str:
    return str(value)


def _numbers(show: Format, kinds: tuple[type, ...] = (int, float)) -> Format:
    """`show` for numbers of `kinds` (never a bool); anything else (None, a bool) as it is."""

    def format_value(value: Any, unit: str) -> str:
        if isinstance(value, bool) or not isinstance(value, kinds):
            return str(value)
        return show(value, unit)

    return format_value


class DecisionKind(str, Enum):
    """The decisions a Recommendation reports, in report order. Each names the state key that
    holds its value (None: its rules only add notes), the unit of that value, and how the value
    reads for people (`display`); `collects`: the value lists every finding's (one per rule),
    not the deciding finding's alone."""

    key: Key | None
    unit: str
    show: Format
    collects: bool

    def __new__(
        cls,
        name: str,
        key: Key | None,
        unit: str = "",
        show: Format = _plain,
        collects: bool = False,
    ) -> DecisionKind:
        member = str.__new__(cls, name)
        member._value_ = name
        member.key = key
        member.unit = unit
        member.show = show
        member.collects = collects
        return member

    # the job as a whole and the machine it runs on, first: what a plan for many ranks leads with
    JOB = "job", None, "", lambda value, unit: "see the notes", True
    DATA_SOURCE = "data_source", Key.DATA_SOURCE
    NUM_WORKERS = "num_workers", Key.NUM_WORKERS, "processes"
    REQUESTS_IN_FLIGHT = (
        "requests_in_flight",
        Key.REQUESTS_IN_FLIGHT,
        "per process",
        _numbers(lambda n, unit: f"{n} {unit}", (int,)),
    )
    INFLIGHT_BYTES = (
        "inflight_bytes",
        Key.INFLIGHT_BYTES,
        "bytes per process",
        _numbers(lambda n, unit: f"{data_size(n)} per process", (int,)),
    )
    PREFETCH_FACTOR = "prefetch_factor", Key.PREFETCH_FACTOR, "batches per worker"
    PIN_MEMORY = "pin_memory", Key.PIN_MEMORY
    SHARD_SIZE = (
        "shard_size",
        Key.SHARD_SIZE_BYTES,
        "bytes",
        _numbers(lambda n, unit: data_size(n)),
    )
    PREFIX_LAYOUT = (
        "prefix_layout",
        Key.PREFIX_LAYOUT,
        "prefixes",
        _numbers(lambda n, unit: counted(n, "prefix", "prefixes"), (int,)),
    )
    THROUGHPUT = (
        "throughput",
        Key.EXPECTED_SAMPLES_PER_S,
        "samples/s",
        _numbers(lambda n, unit: rate(n)),
    )
    PREPROCESS = "preprocess", None
    # several quantities, each with its own unit, in the rationale
    COST = "cost", None, "", lambda value, unit: "see the notes", True

    @classmethod
    def named(cls, name: str) -> DecisionKind | None:
        """The decision called `name`, or None."""
        return next((kind for kind in cls if kind.value == name), None)

    def display(self, value: Any) -> str:
        """`value` for people, with its unit."""
        return self.show(value, self.unit)


State = Mapping[Key, Any]


@dataclass(frozen=True)
class Finding:
    """What a rule concluded: the value for its key, why, and the numbers it used (with units).

    `key` is None for an advisory finding (a note that sets no value).
    """

    rule_id: str
    key: Key | None
    value: Any
    rationale: str
    evidence: dict[str, Any] = field(default_factory=dict)
    measured: bool = False
    confidence: Confidence = "medium"

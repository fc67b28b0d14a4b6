"""Is a training loop waiting for its data? One line, from the measured waiting share.

The levels are the TensorFlow Profiler's input-pipeline analysis (tensorflow.org/guide/profiler,
"Input pipeline analyzer"): a step that spends over 20% of its time waiting for input is highly
input-bound, 5% to 20% moderately, under 5% not. The PyTorch profiler's retired TensorBoard
plugin flagged a DataLoader over 5% of step time the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from advisor.measure.loop.results import Spread

HIGHLY_INPUT_BOUND = 0.20  # share of each step spent waiting for data
INPUT_BOUND = 0.05
SOURCE = (
    "TensorFlow Profiler, input pipeline analyzer: over 20% of step time waiting for input is "
    "highly input-bound, 5-20% moderately, under 5% not"
)

Level = Literal["highly input-bound", "moderately input-bound", "not input-bound"]


@dataclass(frozen=True)
class Verdict:
    """The level, the one line a person reads, and where the thresholds come from."""

    level: Level
    line: str
    source: str = SOURCE

    @property
    def input_bound(self) -> bool:
        return self.level != "not input-bound"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def input_bound(wait_share: float, windows: Spread | None = None) -> Verdict:
    """The verdict on the loop's waiting share over the whole run; the range its windows
    spanned is shown beside it."""
    seen = ""
    if windows is not None and windows.n > 1:
        seen = f" (windows {_pct(windows.low)}-{_pct(windows.high)})"
    share = f"{_pct(wait_share)}{seen}"
    if wait_share > HIGHLY_INPUT_BOUND:
        return Verdict(
            "highly input-bound",
            f"input-bound: {share} of each step waits for data "
            f"(over {_pct(HIGHLY_INPUT_BOUND)}: highly input-bound)",
        )
    if wait_share > INPUT_BOUND:
        return Verdict(
            "moderately input-bound",
            f"moderately input-bound: {share} of each step waits for data "
            f"({_pct(INPUT_BOUND)}-{_pct(HIGHLY_INPUT_BOUND)})",
        )
    return Verdict(
        "not input-bound",
        f"not input-bound: {share} of each step waits for data (under {_pct(INPUT_BOUND)})",
    )

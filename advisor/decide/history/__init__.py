"""The run history: every trial with the answer made from it, every before/after comparison
and every judged loop (an epoch `advisor.watch` saw, a `diagnose` run), kept across processes.

`records`: what is kept (frozen records, whether a repeated trial's answer held, two runs'
figures side by side); `store`: where (an SQLite database in the home cache, best effort);
`cli`: `python -m advisor history` and `%advisor history`. People read it through
`advisor.report.history`.
"""

from __future__ import annotations

from advisor.decide.history.records import (
    AnswerChange,
    ComparisonRecord,
    CountFigure,
    FigurePair,
    History,
    LoopRecord,
    Repeat,
    Run,
    TrialRecord,
    compare_runs,
    repeat_of,
)
from advisor.decide.history.store import HistoryError, HistoryWarning, RunStore, amend, keep

__all__ = [
    "AnswerChange", "ComparisonRecord", "CountFigure", "FigurePair", "History", "HistoryError",
    "HistoryWarning", "LoopRecord", "Repeat", "Run", "RunStore", "TrialRecord", "amend",
    "compare_runs", "keep", "repeat_of",
]  # fmt: skip

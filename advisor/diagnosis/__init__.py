"""The loader a user already has: diagnosed in the advisor's loop, compared with another one,
and put beside the advised loader.

    from advisor.diagnosis import diagnose, compare
    diagnosis = diagnose(loader, consumer_rate=2000)

`loop` runs a loader in the training loop and judges it (`diagnose`, `compare`);
`before_after` advises on the data and compares the exported loader with the user's (it is
the package's one window on the session); `history` keeps a session's trials and comparisons
side by side (`AdvisorSession.history()`); `cli` is `python -m advisor diagnose`. The package
is named for the stage, not `diagnose`: `advisor.diagnose` is the public function.
"""

from __future__ import annotations

from advisor.decide.judged import Comparison, Diagnosis
from advisor.diagnosis.loop import as_step, compare, diagnose

__all__ = ["Comparison", "Diagnosis", "as_step", "compare", "diagnose"]

"""What the model is fed of a trial (`trial_costs`): the wait for an epoch's first sample."""

from __future__ import annotations

import dataclasses

from advisor.decide.facts.costs import trial_costs
from advisor.measure.trial.results import TrialResult
from tests.builders import make_trial


def _started(trial: TrialResult, waits: dict[int, float]) -> TrialResult:
    """`trial` whose sweep measured `waits` for its epochs' first samples, per num_workers."""
    sweep = tuple(
        dataclasses.replace(p, epoch_start_wait_s=waits.get(p.num_workers)) for p in trial.sweep
    )
    decode = dataclasses.replace(trial.decode, start_s=0.002) if trial.decode else None
    return dataclasses.replace(trial, sweep=sweep, decode=decode)


def test_an_epochs_start_is_the_loops_own_where_its_epochs_started() -> None:
    """The sweep's loader processes measured each epoch's start as a loop pays it (sharing the
    cores with the loop); the decode probe timed one start alone. The loop's own wins, by the
    kind of count; the probe's stands where no epoch started in a window."""
    trial = _started(make_trial({0: (300.0, 320.0), 2: 500.0}), {0: 0.006, 2: 0.009})
    as_trialled = {"as_trialled": True, "packed_cpu": False, "listed": True}
    assert trial_costs(trial, 0, **as_trialled).epoch_start_s == 0.006
    assert trial_costs(trial, 2, **as_trialled).epoch_start_s == 0.009
    assert trial_costs(trial, 4, **as_trialled).epoch_start_s == 0.009  # its kind's: workers
    unstarted = _started(make_trial({0: 300.0, 2: 500.0}), {})
    assert trial_costs(unstarted, 0, **as_trialled).epoch_start_s == 0.002  # the probe's
    # training reads what the trial did not (a copy, a packed layout): no start of the listing
    not_listed = {**as_trialled, "listed": False}
    assert trial_costs(trial, 0, **not_listed).epoch_start_s is None  # type: ignore[arg-type]

"""Every bound has one home, and the CLI, the wizard and the library refuse the same values
with the same words, before any work starts."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from advisor.cli import build_parser
from advisor.cli import main as cli_main
from advisor.core.bounds import ListingLimits, Range, TrialBudget, range_of
from advisor.core.workload import STEP_TIME_S, Workload
from advisor.session import AdvisorSession
from advisor.wizard.controller import WizardController

# (config, field, a value just outside at each end, CLI flag, wizard form field or None)
BOUNDS = [
    (TrialBudget, "seconds", (1.9, 3600.5), "--seconds", None),
    (ListingLimits, "max_keys", (0, 1_000_000_001), "--max-keys", None),
    (Workload, "consumer_rate", (0.0, 1.1e7), "--consumer-rate", "samples_per_s"),
    (Workload, "batch_size", (0, 1_000_001), "--batch-size", "batch_size"),
    (Workload, "epochs", (0, 100_001), "--epochs", "epochs"),
    (Workload, "nodes", (0, 100_001), "--nodes", "nodes"),
    (Workload, "gpus_per_node", (0, 65), "--gpus-per-node", "gpus_per_node"),
    (Workload, "get_limit", (0.0, 1.1e9), "--get-limit", "get_limit"),
]
CASES = [
    pytest.param(config, name, value, flag, form, id=f"{name}={value}")
    for config, name, values, flag, form in BOUNDS
    for value in values
]


def test_range_membership_and_wording() -> None:
    closed, half_open = Range(1, 64, int), Range(0, 3600, float, low_open=True)
    assert 1 in closed and 64 in closed and 0 not in closed and 65 not in closed
    assert 2.5 not in closed and True not in closed and "3" not in closed
    assert 0 not in half_open and 1e-9 in half_open and float("nan") not in half_open
    assert (str(closed), str(half_open)) == ("from 1 to 64", "more than 0 and at most 3,600")
    assert str(Range(1, 1e9, int, unit="keys")) == "from 1 to 1,000,000,000 keys"
    assert str(Range(0, 1e7, low_open=True, unit="samples/s")) == (
        "more than 0 and at most 10,000,000 samples/s"
    )
    assert str(Range(0.5, 3600, unit="s")) == "from 0.5 to 3,600 s"
    assert closed.parse(" 12 ", "n") == 12 and Range(1, 10**6, int).parse("1,024", "n") == 1024
    big = Range(1, 10**9, int)
    assert big.parse(str(big).split()[-1], "n") == 10**9  # a bound as written can be typed back
    with pytest.raises(ValueError, match=r"^n must be a whole number from 1 to 64, got 'x'$"):
        closed.parse("x", "n")
    with pytest.raises(ValueError, match=r"^n must be from 1 to 64, got 65$"):
        closed.parse("65", "n")


@pytest.mark.parametrize(("config", "name"), [(config, name) for config, name, *_ in BOUNDS])
def test_every_bound_names_its_unit(config: type, name: str) -> None:
    bound = range_of(config, name)
    assert bound.unit and str(bound).endswith(f" {bound.unit}")


@pytest.mark.parametrize(("config", "name", "value", "flag", "form"), CASES)
def test_library_refuses_out_of_range(
    config: type, name: str, value: float, flag: str, form: str | None
) -> None:
    bound = range_of(config, name)
    with pytest.raises(ValueError, match=rf"^{name}={value!r} must be {re.escape(str(bound))}$"):
        config(**{name: value})
    config(**{name: bound.kind(bound.high)})  # the edges themselves are allowed


@pytest.mark.parametrize(("config", "name", "value", "flag", "form"), CASES)
def test_cli_refuses_out_of_range_at_parse_time(
    config: type, name: str, value: float, flag: str, form: str | None, capsys: Any
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["trial", "/nonexistent", flag, str(value)])
    assert exit_info.value.code == 2
    bound = range_of(config, name)
    assert f"{flag} must be {bound}, got" in capsys.readouterr().err


@pytest.mark.parametrize(("config", "name", "value", "flag", "form"), CASES)
def test_wizard_refuses_out_of_range(
    config: type, name: str, value: float, flag: str, form: str | None
) -> None:
    wizard = WizardController()
    bound = str(range_of(config, name))
    if name == "seconds":
        assert not wizard.run_trial(value)
        assert bound in wizard.errors["trial"] and wizard.job is None
    elif form is not None:
        setattr(wizard.workload_step.form, form, str(value))
        assert wizard.parse_workload() is None
        assert bound in wizard.workload_step.field_errors[form]
    else:  # the wizard lists with the library's default: nothing for the user to type
        assert ListingLimits.max_keys in range_of(ListingLimits, "max_keys")


def test_step_time_bound_everywhere(capsys: Any) -> None:
    with pytest.raises(ValueError, match=r"^step_time_s=0 must be more than 0 and at most 3,600 s"):
        Workload.from_step_time(0, 32)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["trial", "/x", "--step-time", "3601"])
    assert f"--step-time must be {STEP_TIME_S}, got 3601" in capsys.readouterr().err
    wizard = WizardController()
    wizard.workload_step.form.mode, wizard.workload_step.form.step_time_s = "step", "0"
    assert wizard.parse_workload() is None
    assert str(STEP_TIME_S) in wizard.workload_step.field_errors["step_time_s"]


@pytest.mark.timing
def test_a_bad_trial_budget_is_refused_before_any_profiling(tmp_path: Any, capsys: Any) -> None:
    """`trial --seconds 1` used to pass the CLI, profile for up to 20 s, then fail."""
    started = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["trial", str(tmp_path), "--seconds", "1"])
    assert exit_info.value.code == 2
    assert "--seconds must be from 2 to 3,600 s, got 1" in capsys.readouterr().err
    session = AdvisorSession()
    session.set_location(str(tmp_path))
    with pytest.raises(ValueError, match=r"^seconds=1 must be from 2 to 3,600 s$"):
        session.run_trial(seconds=1)
    assert session.profile is None  # refused before the listing
    with pytest.raises(ValueError, match=r"^max_keys=0 must be from 1 to 1,000,000,000 keys$"):
        session.run_profile(max_keys=0)
    assert time.monotonic() - started < 10

"""One report, two fronts: the CLI and the wizard render the same labelled rows
(`advisor.report`) for the same profile, machine and trial, with the same labels and values."""

from __future__ import annotations

import html
from types import SimpleNamespace
from typing import Any

import pytest

from advisor import cli
from advisor.measure.hardware import probe_hardware
from advisor.report import Row, gpu_facts, gpu_rows, hardware_rows, profile_rows, trial_rows
from advisor.report.measured import count_rows
from advisor.report.rows import text_columns
from advisor.wizard.panels.base import rows_html
from tests.builders import make_trial
from tests.wizard.conftest import profiled


def _shown_in_both(rows: list[Row], printed: str, shown: str) -> None:
    for label, value in rows:
        assert label in printed and value in printed, (label, value, printed)
        assert html.escape(label) in shown and html.escape(value) in shown, (label, value)


def test_the_profile_and_the_machine_read_the_same_in_the_cli_and_the_wizard(
    wizard: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    profiled(wizard)
    session = wizard.controller.session
    cli._print_profile(session)
    rows = profile_rows(session.profile)
    assert {"object size", "top-level folders", "listing took"} <= {label for label, _ in rows}
    _shown_in_both(rows, capsys.readouterr().out, wizard.dataset_panel.profile_summary.value)

    wizard.next_button.click()
    # this machine as probed, planned for two A100s: RAM, /dev/shm, the local disk, GPU rows
    session.hardware = probe_hardware().with_target_gpu("A100-80GB", 2)
    wizard.hardware_panel.show()
    cli._print_hardware(session)
    rows = hardware_rows(session.hardware)
    assert {"CPU cores", "RAM", "local disk"} <= {label for label, _ in rows}
    assert dict(rows)["/dev/shm"].endswith(" free)")  # its size, and what is free of it
    assert "scratch disk" not in wizard.hardware_panel.hardware_summary.value
    shown = wizard.hardware_panel.hardware_summary.value
    _shown_in_both(rows, capsys.readouterr().out, shown)
    assert [label for label, _ in gpu_rows(session.hardware)] == ["planned GPU 0", "planned GPU 1"]
    assert shown.count("class='la-card la-gpu'") == 2  # the wizard shows them as cards
    # each card says what the CLI's row says of its GPU
    for gpu, (_, row) in zip(session.hardware.gpus, gpu_rows(session.hardware), strict=True):
        facts = gpu_facts(gpu)
        assert facts and row == ", ".join([gpu.name, *facts])
        assert html.escape(", ".join(facts)) in shown


def test_a_trial_reads_the_same_in_the_cli_and_the_wizard(
    wizard: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    trial = make_trial({0: (190.0, 200.0), 1: (280.0, 300.0), 2: (285.0, 295.0)}, unsteady=(2,))
    session = SimpleNamespace(trial=trial, location=None, profile=None)
    cli._print_trial(session)  # type: ignore[arg-type]
    printed = capsys.readouterr().out
    rows = trial_rows(trial)
    assert {"time used", "best measured", "decode"} <= {label for label, _ in rows}
    wizard.controller.session.trial = trial
    wizard.trial_panel.show()
    shown = wizard.trial_panel.trial_summary.value
    _shown_in_both(rows, printed, shown)
    # what training saw per count: one table, printed as text columns and shown as HTML
    counts = count_rows(trial, records=False)
    assert counts[0][:2] == ("num_workers", "samples/s (median, spread)")
    assert [row[0] for row in counts[1:]] == ["0", "1", "2"]
    assert counts[3][1].startswith(">=")  # count 2 found no steady state: at least
    assert text_columns(counts) in printed
    assert rows_html(counts, "la-trial-counts") in shown

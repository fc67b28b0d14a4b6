"""One report, two fronts: the CLI and the wizard render the same labelled rows
(`advisor.report`) for the same profile, machine and trial, with the same labels and values;
a script and the notebook's live view print the same words for one watched loop."""

from __future__ import annotations

import html
import time
from types import SimpleNamespace
from typing import Any

import pytest
from torch.utils.data import DataLoader

import advisor
from advisor import cli
from advisor.decide.verdict import input_bound
from advisor.measure.hardware import probe_hardware
from advisor.report import Row, gpu_facts, gpu_rows, hardware_rows, profile_rows, trial_rows
from advisor.report.measured import count_rows
from advisor.report.rows import text_columns
from advisor.report.watch import LEVEL_MARKS, start_line, watch_lines
from advisor.wizard.panels.base import rows_html
from advisor.wizard.watchview import WatchView
from bench.watch_check import Sleepy
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


def test_a_watched_loop_reads_the_same_in_a_script_and_in_the_notebook_view() -> None:
    """One real loop: the lines a script prints at its end and the notebook view's headline and
    list are `watch_lines` of the same report, and the view's live headline names the verdict's
    level (`Verdict.level`), not a sentence cut at its colon."""
    loader = DataLoader(
        Sleepy(64, 0.004), batch_size=4
    )  # 0 workers, every sample waits: input-bound
    printed: list[str] = []
    watched = advisor.watch(loader, every=1000, out=printed.append, min_steps=10, history=False)
    for _batch in watched:
        time.sleep(0.001)
    report = watched.report()
    assert report.verdict is not None and report.verdict.level == "highly input-bound"
    lines = watch_lines(report)
    assert printed[-len(lines) :] == [f"advisor.watch: {line}" for line in lines]

    view = WatchView("your loader", min_steps=10)
    assert view.headline.value == f"<b>advisor.watch</b>: {html.escape(start_line('your loader'))}"
    view.step(5, 0.5, 100.0)  # too few steps to judge
    assert "step 5: watching, waiting 50% of each step" in view.headline.value
    view.step(10, 0.5, 100.0)
    level = input_bound(0.5)
    assert level.line.split(":")[0] == "input-bound"  # the old, cut label; not what is shown
    assert f"step 10: {level.level}, waiting 50%" in view.headline.value
    view.done(report)
    assert view.headline.value == f"<b>advisor.watch</b>: {html.escape(lines[0])}"
    assert (
        view.details.value
        == "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines[1:]) + "</ul>"
    )
    said = [a.text for a in view.figure().layout.annotations]
    assert said == [words for _, words in LEVEL_MARKS]

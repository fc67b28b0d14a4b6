"""The runs kept across sessions, inside the recommendation step: every trial with the answer
made from it, whether a repeated trial's answer held, every before/after comparison and every
judged loop (a watched epoch, a diagnose run), of this data set or another; two runs compared.

Folded under one summary line ("3 runs in this session; #3 repeats #1: the answer held ...")
so that a first run adds one line; the tables are the history's rows as the report words them
(`advisor.report.history`), the same as `python -m advisor history` and `%advisor history`
print. Where the run history cannot be read, the session's own runs and the reason instead.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import ipywidgets as widgets

from advisor.decide.history import History, HistoryError, RunStore
from advisor.decide.history.records import kind_of
from advisor.report.history import (
    compare_lines,
    history_comparison_rows,
    history_loop_rows,
    history_trial_rows,
    repeat_words,
)
from advisor.wizard.panels.base import html_area, rows_html, words

if TYPE_CHECKING:
    from advisor.session import AdvisorSession

SHOWN = 200  # the runs the panel reads at most, newest kept
ALL = ""  # the data-set filter's value for every data set


def summary_line(history: History, in_session: int | None = None) -> str:
    """The folded panel's one line: the runs of this session (and of earlier ones shown), and
    the latest repeat's verdict."""
    ours = len(history) if in_session is None else in_session
    line = f"History: {ours} run{'s' if ours != 1 else ''} in this session"
    if len(history) > ours:
        line += f", {len(history) - ours} from earlier ones"
    repeats = history.repeats()
    if repeats:
        line += f"; {repeat_words(repeats[-1])}"
    return line


def history_html(history: History, in_session: int | None = None, note: str = "") -> str:
    """The whole history, folded under its summary line; "" before the first run."""
    if not history:
        return ""
    parts = [f"<div class='la-hint'>{html.escape(note)}</div>"] if note else []
    if history.trials:
        parts.append(
            "<div class='la-hint'>Trials: per num_workers the median samples/s training saw "
            "and the slices' spread; the answer made from each trial.</div>"
        )
        parts.append(rows_html(history_trial_rows(history), "la-history-trials"))
        parts += [f"<div>{words(repeat_words(r))}</div>" for r in history.repeats()]
    if history.comparisons:
        parts.append(
            "<div class='la-hint'>Your loader against the recommended one: samples/s over "
            "the rounds (median, lowest-highest) and the ratio.</div>"
        )
        parts.append(rows_html(history_comparison_rows(history), "la-history-comparisons"))
    if history.loops:
        parts.append(
            "<div class='la-hint'>Loops judged (advisor.watch's epochs, diagnose runs): "
            "samples/s and the waiting share per window, median (lowest-highest).</div>"
        )
        parts.append(rows_html(history_loop_rows(history), "la-history-loops"))
    summary = html.escape(summary_line(history, in_session))
    return (
        f"<details class='la-details la-history'><summary>{summary}</summary>"
        f"{''.join(parts)}</details>"
    )


class HistoryPanel:
    """The history's HTML (`box`), a data-set filter and two runs to compare (`controls`),
    their comparison (`compared`); all in `widget`. `show()` reads the run history again."""

    def __init__(self, session: AdvisorSession, store: RunStore | None = None) -> None:
        self.session, self.store = session, store or RunStore()
        self.box = html_area("la-history-box")
        self.dataset = widgets.Dropdown(description="Data set", options=[("all", ALL)])
        self.first = widgets.Dropdown(description="Compare", options=[("-", 0)])
        self.second = widgets.Dropdown(description="with", options=[("-", 0)])
        self.compared = html_area("la-history-compared")
        self.controls = widgets.HBox([self.dataset, self.first, self.second])
        self.controls.add_class("la-history-controls")
        self.widget = widgets.VBox([self.box, self.controls, self.compared])
        self.kept = self.shown = History()  # the runs read; those the filter shows
        self.dataset.observe(lambda _: self._draw(), names="value")
        for pick in (self.first, self.second):
            pick.observe(lambda _: self._compare(), names="value")

    def show(self) -> None:
        """Read the run history; the filter starts at this session's data set."""
        here = self.session.location.uri if self.session.location is not None else ALL
        try:
            kept = self.store.load(last=SHOWN)
        except HistoryError as exc:
            self.controls.layout.display = "none"
            ours = self.session.history()
            self.box.value = history_html(ours, note=f"Only this session's runs: {exc}")
            return
        runs = kept.runs()
        names = sorted({r.dataset for r in runs})
        self.controls.layout.display = "" if runs else "none"
        self.kept = kept
        self.dataset.options = [("all data sets", ALL), *((name, name) for name in names)]
        self.dataset.value = here if here in names else ALL
        self._draw()

    def _draw(self) -> None:
        shown = self.shown = self.kept.of(self.dataset.value or None)
        numbers = {r.number for r in self.session.history().runs()}
        runs = shown.runs()
        in_session = sum(r.number in numbers for r in runs)
        self.box.value = history_html(shown, in_session=in_session)
        picks = [("-", 0), *((f"#{r.number} {kind_of(r)}", r.number) for r in runs)]
        self.first.options, self.second.options = picks, picks
        self._compare()

    def _compare(self) -> None:
        first, second = self.shown.run(self.first.value), self.shown.run(self.second.value)
        if first is None or second is None:
            self.compared.value = ""
            return
        try:
            lines = compare_lines(first, second)
        except ValueError as exc:
            lines = [str(exc)]
        self.compared.value = "<br>".join(html.escape(line) for line in lines)

"""The session's runs side by side, inside the recommendation step: every trial with the answer
made from it, whether a repeated trial's answer held, and every before/after comparison.

Folded under one summary line ("3 runs in this session: #3 repeats #1: the answer held ...") so
that a first run adds one line; the tables are the history's rows as the report words them
(`advisor.report.history`), the same as `%advisor history` prints.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.diagnosis.history import History
from advisor.report.history import history_comparison_rows, history_trial_rows, repeat_words
from advisor.wizard.panels.base import html_area, words

if TYPE_CHECKING:
    from advisor.session import AdvisorSession


URI_CHARS = 32  # a data set's URI longer than this shows its start and end, whole in its title


def cell_html(cell: str) -> str:
    """One cell; a long URI (or path) on one line, its middle cut ("s3://loader-adv…images/"),
    whole in the title people see on hover: a URI wrapped over four lines had made the table
    tall."""
    uri = "://" in cell or cell.startswith("/")
    if not uri or len(cell) <= URI_CHARS or " " in cell:
        return html.escape(cell)
    keep = (URI_CHARS - 1) // 2
    shown = f"{cell[:keep]}\u2026{cell[-keep:]}"
    return f"<span class='la-uri' title='{html.escape(cell)}'>{html.escape(shown)}</span>"


def rows_html(rows: Sequence[Sequence[str]], css: str) -> str:
    """A header row and body rows as an HTML table in the wizard's table style."""
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{cell_html(cell)}</td>" for cell in row) + "</tr>"
        for row in rows[1:]
    )
    return f"<table class='la-table {css}'><tr>{head}</tr>{body}</table>"


def summary_line(history: History) -> str:
    """The folded panel's one line: how many runs, and the latest repeat's verdict."""
    runs = len(history.trials) + len(history.comparisons)
    line = f"History: {runs} run{'s' if runs != 1 else ''} in this session"
    repeats = history.repeats()
    if repeats:
        line += f"; {repeat_words(repeats[-1])}"
    return line


def history_html(history: History) -> str:
    """The whole history, folded under its summary line; "" before the first run."""
    if not history:
        return ""
    parts = []
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
    return (
        f"<details class='la-details la-history'><summary>{html.escape(summary_line(history))}"
        f"</summary>{''.join(parts)}</details>"
    )


class HistoryPanel:
    """One HTML area; `show()` redraws it from the session's history."""

    def __init__(self, session: AdvisorSession) -> None:
        self.session = session
        self.box = html_area("la-history-box")

    def show(self) -> None:
        self.box.value = history_html(self.session.history())

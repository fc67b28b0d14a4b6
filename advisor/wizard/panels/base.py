"""What every panel shares: the `StepPanel` shape and small widget and HTML builders."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import ipywidgets as widgets

from advisor.wizard.context import Topic

LABEL = {"description_width": "150px"}


class StepPanel:
    """One step's widgets in `box`. After a notification about any of `topics` the wizard calls
    `show()`; `show_busy(busy)` disables what would start a second background job."""

    topics: ClassVar[frozenset[Topic]] = frozenset()
    box: widgets.VBox
    # where the progress of this step's long work shows, beside its button (None: no long work)
    status_slot: widgets.Box | None = None

    def show(self) -> None:
        raise NotImplementedError

    def show_busy(self, busy: bool) -> None:
        """Nothing to disable by default."""


def button(text: str, css: str, style: str = "", tooltip: str = "") -> widgets.Button:
    made = widgets.Button(description=text, button_style=style, tooltip=tooltip or text)
    made.add_class(css)
    return made


def status_slot() -> widgets.Box:
    """An empty box beside a button that starts long work; the wizard puts its progress there."""
    slot = widgets.Box()
    slot.add_class("la-status-slot")
    return slot


def text(label: str, css: str, placeholder: str = "", value: str = "") -> widgets.Text:
    field = widgets.Text(
        value=value,
        description=label,
        placeholder=placeholder,
        layout=widgets.Layout(width="520px"),  # one Layout per widget: they are mutated
        style=LABEL,
    )
    field.add_class(css)
    return field


def html_area(css: str) -> widgets.HTML:
    made = widgets.HTML()
    made.add_class(css)
    return made


def output(css: str) -> widgets.Output:
    made = widgets.Output()
    made.add_class(css)
    return made


def on_value(field: widgets.Widget, apply: Callable[[Any], None]) -> None:
    """Call `apply(new value)` whenever the user (or code) changes `field`."""
    field.observe(lambda change: apply(change["new"]), names="value")


_CODE = re.compile(r"`([^`]+)`")


def words(text: str) -> str:
    """`text` as HTML: escaped, and what it quotes in backticks (a command, a name to type) set
    as code, as the text lines print it: the wizard showed the backticks as characters."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


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


def table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='la-table'>{body}</table>"


def set_outputs(target: widgets.Output, *entries: dict[str, Any]) -> None:
    """Replace an Output widget's content from any thread (no `with output:` capture)."""
    target.outputs = tuple(entries)

"""What every panel shares: the `StepPanel` shape and small widget and HTML builders."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
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


def table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='la-table'>{body}</table>"


def set_outputs(target: widgets.Output, *entries: dict[str, Any]) -> None:
    """Replace an Output widget's content from any thread (no `with output:` capture)."""
    target.outputs = tuple(entries)

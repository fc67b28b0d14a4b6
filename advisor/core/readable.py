"""Results people read (a watched loop's report, a diagnosis, a comparison, a before/after):
`str(result)` is its lines, as the terminal prints them, and a notebook shows the same lines
(`_repr_html_`); `repr` stays the dataclass's, for debugging.

The lines are worded in `advisor.report`, one home for each sentence, a layer above the results'
own: each report module registers its result's lines here by the result's class name
(`lines_for`; by name, as the report imports the results' modules only to type-check: that of
a watched loop's report imports torch, which the wizard defers), and the package face, which
Python imports before any module under it, names the import that registers them all
(`load_report`), so a result prints the same whichever module made it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any, TypeVar

Lines = TypeVar("Lines", bound=Callable[..., list[str]])

_LINES: dict[str, Callable[[Any], list[str]]] = {}  # by the result's `class_name`
# set by `advisor/__init__.py`: imports `advisor.report`, whose modules register the lines
load_report: Callable[[], None] | None = None


def class_name(kind: type) -> str:
    """A class by its module and name: "advisor.decide.judge.JudgedLoop"."""
    return f"{kind.__module__}.{kind.__qualname__}"


def lines_for(name: str) -> Callable[[Lines], Lines]:
    """Register the decorated function as the lines of the results of class `name`
    (`class_name`); it is called with the result alone."""

    def register(lines: Lines) -> Lines:
        _LINES[name] = lines
        return lines

    return register


def lines_of(result: Any) -> list[str]:
    """The result's lines, as its report module words them."""
    name = class_name(type(result))
    if name not in _LINES and load_report is not None:
        load_report()
    try:
        lines = _LINES[name]
    except KeyError:
        raise TypeError(f"no report module words a {name}") from None
    return lines(result)


def lines_html(lines: list[str]) -> str:
    """Lines for a notebook: the first as the headline, the rest a list, every one escaped."""
    shown = [html.escape(line) for line in lines if line]
    if not shown:
        return ""
    items = "".join(f"<li>{line}</li>" for line in shown[1:])
    below = f"<ul>{items}</ul>" if items else ""
    return f'<div class="la-report"><b>{shown[0]}</b>{below}</div>'


class Readable:
    """A result with its lines as its `str` and as its notebook display."""

    def __str__(self) -> str:
        return "\n".join(lines_of(self))

    def _repr_html_(self) -> str:
        return lines_html(lines_of(self))

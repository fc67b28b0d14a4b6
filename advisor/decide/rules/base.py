"""The Rule base class: what every rule is made of (its vocabulary is in `keys`).

A rule's text lives once, in its docstring: a title line, then ``Condition:``,
``Recommendation:`` and ``Source:`` (docs/decision-flow.md's table is generated from them by
``python -m advisor.decide.rules.doc``).
"""

from __future__ import annotations

import inspect
import re
from typing import Any, ClassVar

from advisor.decide.facts.context import Context
from advisor.decide.keys import Confidence, DecisionKind, Finding, Key, State

FIELDS = ("Condition", "Recommendation", "Source")


class Rule:
    """Base of all rules: an id, the decision it feeds, its key, and a pure `evaluate`."""

    id: ClassVar[str]
    decision: ClassVar[DecisionKind]  # the Recommendation decision this rule contributes to
    key: ClassVar[Key | None]  # the state value it sets; None: advisory, it only adds a note
    # advisory rules only: the note is also one of the Recommendation's `notes`, the warnings a
    # user should read before training (the CLI prints them, the wizard shows them on top)
    shown_in_notes: ClassVar[bool] = False

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        raise NotImplementedError

    def finding(
        self,
        value: Any,
        rationale: str,
        *,
        evidence: dict[str, Any] | None = None,
        measured: bool = False,
        confidence: Confidence = "medium",
    ) -> Finding:
        return Finding(self.id, self.key, value, rationale, evidence or {}, measured, confidence)

    @property
    def advisory(self) -> bool:
        return self.key is None

    @property
    def name(self) -> str:
        """The docstring's title line."""
        return inspect.cleandoc(type(self).__doc__ or "").split("\n", 1)[0].rstrip(".")

    def text(self) -> dict[str, str]:
        """The docstring's Condition, Recommendation and Source, each on one line."""
        return rule_text(type(self).__doc__ or "")

    @property
    def condition(self) -> str:
        return self.text()["Condition"]

    @property
    def recommendation(self) -> str:
        return self.text()["Recommendation"]

    @property
    def source(self) -> str:
        return self.text()["Source"]


def rule_text(doc: str) -> dict[str, str]:
    """Parse a rule docstring's labelled fields; a continuation line joins with one space."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    label = re.compile(rf"^({'|'.join(FIELDS)}): (.*)$")
    for line in inspect.cleandoc(doc).splitlines()[1:]:
        match = label.match(line)
        if match:
            current = found.setdefault(match.group(1), [])
            current.append(match.group(2).strip())
        elif current is not None and line.strip():
            current.append(line.strip())
    missing = [f for f in FIELDS if f not in found]
    if missing:
        raise ValueError(f"rule docstring lacks {', '.join(missing)}")
    return {name: " ".join(parts) for name, parts in found.items()}

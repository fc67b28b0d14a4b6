"""No front reads data back out of a sentence: a label is a field (`Verdict.level`,
`Bottleneck.stage`), never a sentence cut at its punctuation. Checked by parsing the modules
people read from: a `.split`, `.partition` or `.rpartition` at ":" or " (" is a sentence taken
apart."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRONTS = ("advisor/report", "advisor/wizard", "advisor/cli", "advisor/integrations")
FRONT_MODULES = ("watcher.py", "magic.py", "session.py", "export.py", "before_after.py")
CUTS = ("split", "partition", "rpartition")
# the history's table shortens a bottleneck kept as words in records written by earlier
# versions (the stage itself is not stored); the one cut left, until the record keeps the stage
KNOWN = {("advisor/report/history.py", "_short")}


def _modules() -> list[Path]:
    paths = [p for front in FRONTS for p in sorted((ROOT / front).rglob("*.py"))]
    return paths + [ROOT / "advisor" / name for name in FRONT_MODULES]


def sentence_cuts(source: str) -> list[tuple[str, int]]:
    """(the enclosing function, the line) of each cut of a string at ":" or " (" in `source`."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else function
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr in CUTS
                and child.args
                and isinstance(child.args[0], ast.Constant)
                and isinstance(child.args[0].value, str)
                and any(mark in child.args[0].value for mark in (":", " ("))
            ):
                found.append((function, child.lineno))
            visit(child, inner)

    visit(ast.parse(source), "")
    return found


def test_the_check_finds_a_verdict_cut_at_its_colon() -> None:
    """It can fail: the watch view's old label, `input_bound(share).line.split(":")[0]`."""
    old = 'def step(share):\n    return input_bound(share).line.split(":")[0]\n'
    assert sentence_cuts(old) == [("step", 2)]
    assert sentence_cuts('def f(line):\n    return line.split("_")\n') == []


def test_no_front_cuts_a_sentence_back_into_data() -> None:
    cuts = [
        (str(path.relative_to(ROOT)), function, line)
        for path in _modules()
        for function, line in sentence_cuts(path.read_text(encoding="utf-8"))
    ]
    assert [c for c in cuts if (c[0], c[1]) not in KNOWN] == []
    assert {(c[0], c[1]) for c in cuts} == KNOWN  # a fixed one leaves the list

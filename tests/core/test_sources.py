"""Every citation of a published source in the product names a source that docs/sources.md
describes, and where it gives that source's section number, the right one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "docs" / "sources.md"
CITED = re.compile(r"\[(CPP|IO|SRC|ORC)\](?:\s+(\d+)\b)?")


def _sections() -> dict[str, str]:
    """tag -> its section number, from the headings "## N. [TAG]: ..."."""
    text = SOURCES.read_text(encoding="utf-8")
    return {tag: number for number, tag in re.findall(r"^## (\d+)\. \[(\w+)\]", text, re.M)}


def _citations() -> list[tuple[str, str, str | None]]:
    found = []
    for path in [*sorted((ROOT / "advisor").rglob("*.py")), ROOT / "docs" / "decision-flow.md"]:
        for match in CITED.finditer(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def test_every_citation_resolves_to_a_section_of_the_sources() -> None:
    sections = _sections()
    assert set(sections) == {"CPP", "IO", "SRC", "ORC"}
    citations = _citations()
    assert len(citations) > 40  # the rules cite them throughout
    wrong = [
        (where, tag, number)
        for where, tag, number in citations
        if tag not in sections or (number is not None and number != sections[tag])
    ]
    assert not wrong, wrong

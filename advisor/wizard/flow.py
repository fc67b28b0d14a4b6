"""The decision-flow diagram with the path a recommendation took highlighted (Mermaid)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

DECISION_FLOW = Path(__file__).resolve().parents[2] / "docs" / "decision-flow.md"
_FENCE = re.compile(r"```mermaid\s*\n(.*?)```", re.S)
TAKEN_STYLE = "fill:#f5a623,stroke:#b36b00,stroke-width:3px,color:#1a1a1a"


def mermaid_source(markdown: str) -> str | None:
    """The first ```mermaid block of a Markdown document, without its fence."""
    match = _FENCE.search(markdown)
    return match.group(1).rstrip() + "\n" if match else None


def highlight(source: str, path: Iterable[str]) -> str:
    """`source` plus a class that highlights the nodes whose ids are in `path`."""
    ids = [node for node in dict.fromkeys(path) if re.search(rf"\b{re.escape(node)}\b", source)]
    lines = [source.rstrip(), f"    classDef taken {TAKEN_STYLE}"]
    if ids:
        lines.append(f"    class {','.join(ids)} taken")
    return "\n".join(lines) + "\n"


def flow_mermaid(path: Iterable[str], document: Path = DECISION_FLOW) -> str | None:
    """The decision flow's Mermaid source with `path` highlighted, or None if the doc is absent."""
    try:
        source = mermaid_source(document.read_text(encoding="utf-8"))
    except OSError:
        return None
    return None if source is None else highlight(source, path)


def flow_markdown(path: Iterable[str], document: Path = DECISION_FLOW) -> str | None:
    """The same as a Markdown mermaid fence (for front ends without a Mermaid mime renderer)."""
    source = flow_mermaid(path, document)
    return None if source is None else f"```mermaid\n{source}```\n"


def flow_bundle(path: Iterable[str], document: Path = DECISION_FLOW) -> dict[str, object] | None:
    """An Output widget entry: JupyterLab 4 draws text/vnd.mermaid; others get the Markdown."""
    source = flow_mermaid(path, document)
    if source is None:
        return None
    return {
        "output_type": "display_data",
        "data": {
            "text/vnd.mermaid": source,
            "text/markdown": f"```mermaid\n{source}```\n",
            "text/plain": source,
        },
        "metadata": {},
    }

"""The decision-flow diagram with the path a recommendation took highlighted (Mermaid).

The diagram ships as package data (`decision_flow.mmd`), so an installed wheel draws it without the
source tree; docs/decision-flow.md embeds the same text, and a test keeps the two identical.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from advisor.wizard.package_data import PackageDataMissingError, read_package_text

DIAGRAM_RESOURCE = "decision_flow.mmd"
TAKEN_STYLE = "fill:#f5a623,stroke:#b36b00,stroke-width:3px,color:#1a1a1a"
_FENCE = re.compile(r"```mermaid\s*\n(.*?)```", re.S)


# the packaged diagram cannot be read: the install is incomplete
DiagramMissingError = PackageDataMissingError


def diagram_source() -> str:
    """The decision flow's Mermaid source, read from the installed package."""
    return read_package_text(DIAGRAM_RESOURCE, "the decision-flow diagram")


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


def flow_mermaid(path: Iterable[str], source: str | None = None) -> str:
    """The Mermaid source (`source`, by default the packaged diagram) with `path` highlighted."""
    return highlight(diagram_source() if source is None else source, path)


def flow_markdown(path: Iterable[str], source: str | None = None) -> str:
    """The same as a Markdown mermaid fence (for front ends without a Mermaid mime renderer)."""
    return f"```mermaid\n{flow_mermaid(path, source)}```\n"


def flow_bundle(path: Iterable[str], source: str | None = None) -> dict[str, object]:
    """An Output widget entry: JupyterLab 4 draws text/vnd.mermaid; others get the Markdown."""
    mermaid = flow_mermaid(path, source)
    return {
        "output_type": "display_data",
        "data": {
            "text/vnd.mermaid": mermaid,
            "text/markdown": f"```mermaid\n{mermaid}```\n",
            "text/plain": mermaid,
        },
        "metadata": {},
    }

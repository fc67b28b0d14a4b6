"""The package layout's import rule (docs/architecture.md, "Layers"), checked by parsing imports.

Every import counts: at module level, inside functions, and under `if TYPE_CHECKING`. A module's
package is the longest prefix in LAYERS; it may import only what its rule allows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("advisor", "native_loader")
FRONT = "advisor (front)"

# package -> the packages its modules may import (its own always included)
LAYERS: dict[str, set[str]] = {
    "native_loader": set(),
    "advisor.core": {"native_loader"},
    "advisor.demo": {"advisor.core"},
    "advisor.measure": {"advisor.core", "native_loader"},
    "advisor.decide": {"advisor.core", "advisor.measure", "native_loader"},
    "advisor.reshard": {"advisor.core", "native_loader"},
    "advisor.diagnosis": {"advisor.core", "advisor.measure", "advisor.decide", "native_loader"},
    "advisor.report": {
        "advisor.core",
        "advisor.measure",
        "advisor.decide",
        "advisor.diagnosis",
        "native_loader",
    },
    FRONT: {"advisor", "native_loader"},
}
SIZE_LIMIT = 400  # lines: the house guide
FRONT_MODULES = 8  # top-level modules of `advisor`: the doors and the session
# single modules allowed one more import than their package
EXCEPTIONS: dict[str, set[str]] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> Iterator[tuple[str, Path]]:
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield module_name(path), path


def imports_of(name: str, path: Path) -> set[str]:
    """The modules `path` imports (absolute names), relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from pkg import module` imports the module
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def layer_of(name: str) -> str:
    matches = [layer for layer in LAYERS if layer != FRONT and _within(name, layer)]
    return max(matches, key=len) if matches else FRONT


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


MODULES = dict(product_modules())
GRAPH = {
    name: {m for m in imports_of(name, path) if m in MODULES and m != name}
    for name, path in MODULES.items()
}


def test_every_product_module_belongs_to_a_layer_and_the_front_is_small() -> None:
    front = sorted(n for n in MODULES if layer_of(n) == FRONT)
    # the doors: top-level modules, the command line, the wizard, the frameworks' callbacks
    doors = ("advisor.cli", "advisor.wizard", "advisor.integrations")
    front_packages = {n for n in front if n.count(".") <= 1} | {
        n for n in front if any(_within(n, door) for door in doors)
    }
    assert set(front) == front_packages, f"modules outside every stage package: {front}"
    top = sorted(n for n in front if n.count(".") == 1 and MODULES[n].name != "__init__.py")
    assert len(top) <= FRONT_MODULES, f"{len(top)} top-level modules (cap {FRONT_MODULES}): {top}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_follow_the_layer_rule(name: str) -> None:
    layer = layer_of(name)
    allowed = {layer} | LAYERS[layer] | EXCEPTIONS.get(name, set())
    if layer == FRONT:
        allowed |= {"advisor"}
    wrong = sorted(
        target
        for target in imports_of(name, MODULES[name])
        if target.split(".")[0] in {*PRODUCT, "testing", "bench", "tests"}
        and not any(_within(target, ok) for ok in allowed)
        # a package's face (its __init__) is not a layer of its own: `advisor` itself is
        # the front, which nothing below may import
        and not (target == "advisor" and layer == FRONT)
    )
    assert not wrong, f"{name} ({layer}) imports {wrong}; allowed: {sorted(allowed)}"


def test_no_import_circles() -> None:
    """Depth-first search over module imports, type-only imports included. A submodule's
    implicit import of its own package's face is not an edge (every submodule would close a
    loop with a face that re-exports it)."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(GRAPH[node]):
            if node.startswith(nxt + "."):
                continue  # a submodule importing its own package's face
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)


def test_no_module_is_over_the_size_limit() -> None:
    """The product's modules and native sources, and the benchmarks' and the test
    infrastructure's modules: code the house maintains (the tests' case files are not)."""
    sources = [
        *MODULES.values(),
        *(ROOT / "native_loader" / "csrc").glob("*.[ch]pp"),
        *(ROOT / "bench").rglob("*.py"),
        *(ROOT / "testing").rglob("*.py"),
    ]
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > SIZE_LIMIT
    }
    assert not long, f"over {SIZE_LIMIT} lines: {long}"


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The check can fail: a core module importing the front is reported."""
    fake = ROOT / "advisor" / "core" / "bounds.py"
    source = fake.read_text(encoding="utf-8") + "\nfrom advisor.cli import main\n"
    probe = tmp_path / "bounds.py"
    probe.write_text(source, encoding="utf-8")
    found = imports_of("advisor.core.bounds", probe)
    layer = layer_of("advisor.core.bounds")
    allowed = {layer} | LAYERS[layer]
    assert "advisor.cli" in found
    assert not any(_within("advisor.cli", ok) for ok in allowed)

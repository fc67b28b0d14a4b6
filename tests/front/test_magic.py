"""`%load_ext advisor` and `%advisor`: its arguments reach the wizard, `--demo` picks a layout,
`--help` names the commands and layouts, and `%advisor cache` lists and removes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.wizard.conftest import WIDGET_WARNINGS

pytestmark = WIDGET_WARNINGS


def test_magic_parses_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    import advisor
    from advisor import magic

    shown: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        "advisor.wizard.show", lambda *a, **k: shown.append((a, k)) or SimpleNamespace()
    )
    magic.advisor_magic("s3://b/p/ --endpoint-url http://127.0.0.1:9 --profile dev")
    assert shown == [(("s3://b/p/",), {"endpoint_url": "http://127.0.0.1:9", "aws_profile": "dev"})]
    demos: list[str] = []
    wizard = SimpleNamespace(controller=SimpleNamespace(use_demo=demos.append))
    monkeypatch.setattr("advisor.wizard.show", lambda *a, **k: wizard)
    magic.advisor_magic("--demo shards")
    magic.advisor_magic("--demo")
    assert demos == ["shards", "small-images"]
    registered: dict[str, Any] = {}

    class Shell:
        def register_magic_function(self, fn: Any, magic_kind: str, magic_name: str) -> None:
            registered[magic_name] = (fn, magic_kind)

    advisor.load_ipython_extension(Shell())
    assert registered["advisor"] == (magic.advisor_magic, "line")


def test_magic_help_names_diagnose_cache_and_the_layouts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`%advisor --help` names the demo's data sets, `diagnose` and `cache`; a layout that does
    not exist is refused before anything starts; `%advisor cache` lists the home cache."""
    from advisor import magic
    from advisor.demo import LAYOUTS

    assert magic.DEMO_LAYOUTS == LAYOUTS  # the help's copy of them
    magic.advisor_magic("--help")
    text = capsys.readouterr().out
    assert "small-images, shards, large" in text
    assert "%advisor diagnose LOADER" in text and "%advisor cache" in text
    shown: list[Any] = []
    monkeypatch.setattr("advisor.wizard.show", lambda *a, **k: shown.append(a))
    magic.advisor_magic("--demo nope")
    assert "invalid choice: 'nope'" in capsys.readouterr().err and shown == []
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", str(tmp_path / "demo"))
    (tmp_path / ".cache" / "loader-advisor" / "abc").mkdir(parents=True)
    (tmp_path / ".cache" / "loader-advisor" / "abc" / "x.obj").write_bytes(bytes(2048))
    magic.advisor_magic("cache")
    listed = capsys.readouterr().out.splitlines()[1]
    assert listed.split()[:3] == ["abc", "2.0", "KiB"], listed
    assert "2.0 KiB cached by a streaming loader" in listed
    magic.advisor_magic("cache --remove abc")
    assert capsys.readouterr().out.startswith("removed abc (2.0 KiB)")
    assert not (tmp_path / ".cache" / "loader-advisor" / "abc").exists()

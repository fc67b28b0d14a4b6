"""The Export step: what to do next with the module, and the home cache listed and freed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor.wizard.controller import WizardController
from tests.wizard.conftest import WIDGET_WARNINGS, FakeSession

pytestmark = WIDGET_WARNINGS


def test_the_export_step_lists_the_home_cache_and_removes_from_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The Export step lists what the home cache holds with sizes (real files), and its Remove
    button frees the picked entry; a name it does not hold is the step's error."""
    from advisor.wizard.views import Wizard

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", str(tmp_path / "demo"))
    root = tmp_path / ".cache" / "loader-advisor"
    for name, size in (("big", 3 * 2**20), ("small", 4096)):
        (root / name).mkdir(parents=True)
        (root / name / "x.obj").write_bytes(bytes(size))
    (tmp_path / "demo" / "v1").mkdir(parents=True)
    (tmp_path / "demo" / "v1" / "0.jpg").write_bytes(bytes(1000))
    w = Wizard(WizardController(FakeSession()))  # type: ignore[arg-type]
    try:
        panel = w.export_panel
        panel.show()
        assert "holds 3.0 MiB:" in panel.cache_list.value
        assert "<td><code>big</code></td><td>3.0 MiB</td>" in panel.cache_list.value
        assert list(panel.cache_pick.options) == ["big", "small", "demo"]
        panel.cache_pick.value = "big"
        panel.cache_remove.click()
        assert not (root / "big").exists() and (root / "small").exists()
        assert list(panel.cache_pick.options) == ["small", "demo"]  # shown again, at once
        assert "<code>big</code>" not in panel.cache_list.value
        assert not w.controller.export_step.remove_cached("nope")
        assert "holds no 'nope'" in w.controller.errors["export"]
    finally:
        w.controller.close()


def test_the_export_step_says_what_next(wizard: Any) -> None:
    """The last step ends with what to do next: check the module, use it in training, prepare
    a copy-local's copy once per node (only for one), and when to ask again."""
    from advisor.wizard.panels.export import what_next

    panel = wizard.export_panel
    panel.show()
    said = panel.next_steps.value
    assert "What next" in said and "<code>python dataloader_config.py</code>" in said
    assert "from dataloader_config import make_dataloader" in said and "--prepare" not in said
    copy = what_next("my_loader", copy_local=True)
    assert "<code>python my_loader.py --prepare</code> once per node" in copy


class _Advice(FakeSession):
    """The scripted session whose export's JSON follows its recommendation's num_workers and
    data source, as a real export's does."""

    def export(self) -> Any:
        bundle = super().export()
        rec = self.recommendation
        bundle.json_text = (
            f'{{"data_source": "{rec.data_source}", "loader": {{"num_workers": '
            f"{rec.num_workers}}}}}"
        )
        return bundle


def test_export_says_when_the_saved_file_is_out_of_date(tmp_path: Path) -> None:
    """Saved, then a newer recommendation no longer matching it: the Export step says "out of
    date" and what differs, not "saved:", until it is saved again."""
    from types import SimpleNamespace

    from advisor.wizard.views import Wizard

    w = Wizard(WizardController(_Advice()))  # type: ignore[arg-type]
    c, panel = w.controller, w.export_panel
    try:
        c.session.run_recommend()
        assert c.build_export()
        panel.save_dir.value = str(tmp_path)
        panel.save_button.click()
        assert panel.saved.value.startswith("saved: ") and "out of date" not in panel.saved.value
        c.session.recommendation = SimpleNamespace(
            **{**vars(c.session.recommendation), "num_workers": 4, "data_source": "copy-local"}
        )
        c.export_step.forget_bundle()  # as a new recommendation does
        assert c.build_export()
        said = panel.saved.value
        assert "out of date" in said and not said.startswith("saved: "), said
        assert "data_source stream -&gt; copy-local, num_workers 2 -&gt; 4" in said, said
        assert "Save again" in said
        panel.save_button.click()
        assert panel.saved.value.startswith("saved: ") and "out of date" not in panel.saved.value
    finally:
        c.close()

"""The Workload step: the form parsed into the session's workload, each field's error beside
it, and the user's own loader and training step named."""

from __future__ import annotations

from typing import Any

from advisor.wizard.controller import WizardController
from tests.wizard.conftest import WIDGET_WARNINGS, FakeSession

pytestmark = WIDGET_WARNINGS


def test_workload_step_time_mode() -> None:
    c = WizardController(FakeSession())  # type: ignore[arg-type]
    c.workload_step.form.mode = "step"
    c.workload_step.form.step_time_s = "0.5"
    c.workload_step.form.batch_size = "128"
    c.workload_step.form.transform = "not a callable"
    assert (
        c.parse_workload() is None
        and "module:callable" in c.workload_step.field_errors["transform"]
    )
    c.workload_step.form.transform = "mypkg.transforms:decode"
    workload = c.parse_workload()
    assert workload is not None and workload.consumer_rate == 256.0
    c.workload_step.form.gpus_per_node = "65"
    assert c.parse_workload() is None
    assert "must be from 1 to 64 GPUs, got" in c.workload_step.field_errors["gpus_per_node"]
    c.workload_step.form.gpus_per_node = "0"
    assert c.parse_workload() is None
    assert "must be from 1 to 64 GPUs, got" in c.workload_step.field_errors["gpus_per_node"]


def test_workload_names_the_users_loader_and_step(wizard: Any) -> None:
    c = wizard.controller
    wizard.workload_panel.loader.value = "my loader"
    assert (
        "neither a notebook variable nor module:function"
        in wizard.workload_panel.workload_errors.value
    )
    wizard.workload_panel.loader.value = "tests_loader:make"
    wizard.workload_panel.loader_step.value = "train_step"
    assert c.workload_step.field_errors == {}
    wizard.workload_panel.loader.value = ""
    assert "give your loader too" in c.workload_step.field_errors["loader_step"]

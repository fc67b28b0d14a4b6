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
    wizard.workload_panel.loader.value = f"{__name__}:make_loader"
    wizard.workload_panel.loader_step.value = f"{__name__}:train_step"
    assert c.workload_step.field_errors == {}
    wizard.workload_panel.loader.value = ""
    assert "give your loader too" in c.workload_step.field_errors["loader_step"]


def make_loader() -> list[list[int]]:
    return [[1, 2], [3, 4]]


def train_step(batch: list[int]) -> None:
    del batch


def test_the_users_loader_is_looked_up_as_it_is_typed(wizard: Any) -> None:
    """A loader that does not import, or no notebook variable by its name, is its field's
    error in the Workload step, and Next stays there: not an error after the trial beside a
    Run again that fails the same way."""
    c, panel = wizard.controller, wizard.workload_panel
    c.go(2)
    panel.loader.value = "no_such_module_here:make"
    said = c.workload_step.field_errors["loader"]
    assert "cannot import loader module 'no_such_module_here'" in said
    assert "no_such_module_here" in panel.workload_errors.value
    panel.loader.value = f"{__name__}:no_such_function"
    assert "has no attribute 'no_such_function'" in c.workload_step.field_errors["loader"]
    panel.loader.value = "my_loader"  # no notebook here: no variable by that name
    assert "no variable named 'my_loader'" in c.workload_step.field_errors["loader"]
    assert not c.next() and c.step_name == "workload"
    panel.loader.value = f"{__name__}:make_loader"
    panel.loader_step.value = "nowhere:step"
    assert "cannot import step module 'nowhere'" in c.workload_step.field_errors["loader_step"]
    panel.loader_step.value = ""
    assert c.workload_step.field_errors == {} and c.next() and c.step_name == "trial"

"""The notebook wizard: `from advisor.wizard import show; wizard = show()`.

`WizardController` (controller.py) is the headless state and engine driver: one state object per
step (steps/), sharing a status board (context.py) and one background job (jobs.py). `Wizard`
(views.py) is the ipywidgets shell over it, with one panel per step (panels/); charts.py and
flow.py build its figures and diagram, style.css styles it.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from advisor.core.extras import require_extra
from advisor.wizard.controller import STEPS, WizardController

if TYPE_CHECKING:
    from advisor.session import AdvisorSession
    from advisor.wizard.views import Wizard

__all__ = ["STEPS", "Wizard", "WizardController", "show"]


def __getattr__(name: str) -> Any:
    if name == "Wizard":
        return _views().Wizard
    raise AttributeError(name)


def _views() -> ModuleType:
    require_extra("wizard")  # a missing optional dependency names its install command
    from advisor.wizard import views

    return views


def show(
    uri: str = "",
    endpoint_url: str = "",
    aws_profile: str = "",
    session: AdvisorSession | None = None,
    display: bool = True,
) -> Wizard:
    """Build the wizard (prefilled with `uri`, `endpoint_url`, `aws_profile`) and display it.

    Returns the widget; `wizard.controller` drives the same wizard from code. Assign the result
    (`wizard = show()`) so the notebook does not display it a second time.
    """
    controller = WizardController(
        session, uri=uri, endpoint_url=endpoint_url, aws_profile=aws_profile
    )
    wizard: Wizard = _views().Wizard(controller)
    if display:
        from IPython.display import display as ipython_display

        ipython_display(wizard)
    return wizard

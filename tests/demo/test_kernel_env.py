"""advisor.demo.kernel_env: while a session uses the demo, a loader of the user's own in this
process (the README's boto3 tutorial loader) reads it with nothing set by hand; leaving the
demo puts the AWS variables back, and the keys never appear in what the wizard says."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from botocore.exceptions import NoCredentialsError

import advisor.demo
from advisor.demo import kernel_env
from advisor.demo.server import S3Endpoint
from advisor.session import AdvisorSession
from tests.browser.browser_helpers import SMALL_DEMO, small_demo_env

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ipywidgets.*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:comm.*"),
]

TUTORIAL = Path(__file__).resolve().parents[2] / "examples" / "tutorial_loader.py"
USER_SET = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION")


def _tutorial() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tutorial_loader", TUTORIAL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def demo_found(s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Endpoint]:
    """The demo on the test endpoint, found as `make lab`'s is; no AWS keys or endpoint in
    this process, as in a kernel a user started by hand."""
    for name, value in small_demo_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    for name in USER_SET:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "a-token-of-other-keys")
    advisor.demo.stop_demo()  # forget a demo found earlier in this process
    yield s3_endpoint
    advisor.demo.stop_demo()


def test_the_tutorial_loader_reads_the_demo_with_nothing_set_by_hand(
    demo_found: S3Endpoint, tmp_path: Path
) -> None:
    tutorial = _tutorial()
    with pytest.raises(NoCredentialsError):  # before the demo: nothing to read it with
        tutorial.make_loader()
    session = AdvisorSession()
    session.use_demo("small-images")
    batch = next(iter(tutorial.make_loader()))
    assert len(batch) == min(32, SMALL_DEMO.images)  # decoded images, read through boto3
    assert os.environ["AWS_ENDPOINT_URL"] == demo_found.url
    assert "AWS_SESSION_TOKEN" not in os.environ  # a token of other keys would not sign here
    session.set_location(str(tmp_path))  # other data: the variables as they were
    assert all(name not in os.environ for name in USER_SET)
    assert os.environ["AWS_SESSION_TOKEN"] == "a-token-of-other-keys"
    assert not kernel_env.active()


def test_choosing_the_demo_again_keeps_what_was_there_before(demo_found: S3Endpoint) -> None:
    session = AdvisorSession()
    session.use_demo("small-images")
    session.use_demo("shards")  # another layout: still the demo, the first values kept
    assert os.environ["AWS_ENDPOINT_URL"] == demo_found.url
    advisor.demo.stop_demo()
    assert "AWS_ENDPOINT_URL" not in os.environ
    assert os.environ["AWS_SESSION_TOKEN"] == "a-token-of-other-keys"


def test_a_variable_the_user_changed_during_the_demo_is_left_alone(
    demo_found: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = AdvisorSession()
    session.use_demo("small-images")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # the user's own, set since
    advisor.demo.stop_demo()
    assert os.environ["AWS_ENDPOINT_URL"] == "http://127.0.0.1:1"
    assert "AWS_ACCESS_KEY_ID" not in os.environ


def test_the_workload_step_says_so_in_one_line_without_the_keys(demo_found: S3Endpoint) -> None:
    from advisor.wizard.views import Wizard

    wizard = Wizard()
    c = wizard.controller
    assert c.workload_step.demo_note is None  # no demo: nothing to say
    assert c.use_demo("small-images", profile=False) and c.wait(60)
    c.go(2)
    note = wizard.workload_panel.demo_note.value
    assert "AWS_ENDPOINT_URL" in note and "AWS_SECRET_ACCESS_KEY" in note, note
    assert "\n" not in (c.workload_step.demo_note or "")
    keys = demo_found.credentials
    assert keys.access_key not in note and keys.secret_key not in note
    wizard.close()

"""The Dataset step: the location typed or the demo picked, profiled in the background, its
sizes shown; every error the profile can meet (with the scripted session and against the real
local S3 endpoint) is said inline, and the user retries without restarting anything."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.core.location import DatasetLocation
from advisor.core.units import binary_size
from advisor.demo.server import S3Endpoint
from advisor.wizard import charts
from advisor.wizard.controller import WizardController
from tests.wizard.conftest import (
    WIDGET_WARNINGS,
    FakeSession,
    profiled,
    scripted_profile,
    wizard_threads,
)

pytestmark = WIDGET_WARNINGS


def test_sizes_read_in_binary_units() -> None:
    assert binary_size(0) == "0 B"
    assert binary_size(1536) == "1.5 KiB"
    assert binary_size(64 * 2**20) == "64 MiB"  # the one formatter (tests/core/test_units.py)
    from advisor.report import profile_rows

    rows = dict(profile_rows(scripted_profile()))
    assert rows["total size"] == "279 KiB"
    assert rows["object size"] == "median 2.9 KiB, p90 68 KiB, p99 137 KiB, max 137 KiB"


def test_size_histogram_has_one_bar_per_bin() -> None:
    figure = charts.size_histogram(scripted_profile())
    bar = figure.data[0]
    assert list(bar.y) == [1, 1, 1, 2, 1]  # 512 B, 1 KiB, 2 KiB, 64 KiB (x2), 128 KiB bins
    assert bar.x[0].startswith("512 B")


def test_starts_on_dataset_and_next_waits_for_a_profile(wizard: Any) -> None:
    assert wizard.body.children[0]._dom_classes == ("la-step-dataset",)
    assert wizard.next_button.disabled
    wizard.next_button.click()
    assert wizard.controller.step == 0
    profiled(wizard)
    assert "6" in wizard.dataset_panel.profile_summary.value  # object count
    bundle = wizard.dataset_panel.size_chart.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert bundle["data"][0]["y"] == [1, 1, 1, 2, 1]
    assert not wizard.next_button.disabled and wizard.progress.value == 1.0


def test_bad_uri_is_an_inline_error_and_retry_works(wizard: Any) -> None:
    wizard.dataset_panel.uri.value = "gs://bucket/data/"
    wizard.dataset_panel.profile_button.click()
    assert "unsupported URI scheme" in wizard.error.value
    assert not wizard_threads()
    profiled(wizard)
    assert wizard.error.value == "" and wizard.controller.profile is not None


def test_engine_error_in_the_worker_is_shown_and_the_thread_ends() -> None:
    from advisor.wizard.views import Wizard

    session = FakeSession(fail=PermissionError("AccessDenied on s3://bucket/data/"))
    w = Wizard(WizardController(session))  # type: ignore[arg-type]
    profiled(w)
    assert "access denied" in w.error.value
    assert not w.controller.busy and not wizard_threads()
    assert not w.dataset_panel.profile_button.disabled  # the user can correct and retry


def _profile_error(w: Any, uri: str, endpoint: str = "") -> str:
    w.dataset_panel.uri.value, w.dataset_panel.endpoint.value = uri, endpoint
    w.dataset_panel.profile_button.click()
    assert w.controller.wait(60)
    assert w.controller.profile is None and not w.controller.busy
    assert not w.dataset_panel.profile_button.disabled and w.next_button.disabled
    return str(w.controller.errors.get("dataset", ""))


def test_real_bad_scheme(real_wizard: Any) -> None:
    message = _profile_error(real_wizard, "ftp://host/data/")
    assert message.startswith("invalid input: unsupported URI scheme 'ftp'")
    assert "unsupported URI scheme" in real_wizard.error.value


@pytest.mark.timeout(60)
def test_real_missing_bucket(real_wizard: Any, s3_endpoint: S3Endpoint) -> None:
    message = _profile_error(real_wizard, "s3://no-such-bucket-here/data/", s3_endpoint.url)
    assert message.startswith("not found"), message


@pytest.mark.timeout(60)
def test_real_unreachable_endpoint(real_wizard: Any, own_port: int) -> None:
    closed = f"http://127.0.0.1:{own_port}"
    message = _profile_error(real_wizard, "s3://bucket/data/", closed)
    assert message.startswith(("cannot reach the endpoint", "timed out")), message


@pytest.mark.timeout(60)
def test_real_empty_prefix(real_wizard: Any, s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    message = _profile_error(real_wizard, f"s3://{s3_bucket}/nothing-here/", s3_endpoint.url)
    assert message.startswith("not found: no objects under"), message


@pytest.mark.timeout(60)
def test_real_access_denied_then_retry(
    real_wizard: Any,
    s3_endpoint: S3Endpoint,
    s3_client: Any,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="data/a.bin", Body=b"x" * 100)
    secret = s3_endpoint.credentials.secret_key
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    message = _profile_error(real_wizard, f"s3://{s3_bucket}/data/", s3_endpoint.url)
    assert message.startswith("access denied"), message
    assert "not-the-secret" not in message
    # The user fixes the credentials and retries without restarting anything.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    real_wizard.controller.session.location = None  # a new reader resolves credentials again
    real_wizard.dataset_panel.profile_button.click()
    assert real_wizard.controller.wait(60)
    assert real_wizard.controller.profile is not None and real_wizard.error.value == ""


def test_missing_credentials_say_what_to_set() -> None:
    from advisor.core.errors import describe

    message = describe(
        PermissionError(
            "no AWS credentials found (environment, profile, SSO or instance role); "
            "pass credentials=Credentials(...) or ReaderConfig(unsigned=True)"
        )
    )
    assert "access denied" not in message and "Credentials(" not in message
    for setting in ("AWS_PROFILE", "AWS profile field", "anonymous access"):
        assert setting in message
    assert describe(PermissionError("AccessDenied on s3://b/k")).startswith("access denied")


def test_an_absent_endpoint_is_reported_before_credentials(
    monkeypatch: pytest.MonkeyPatch, own_port: int
) -> None:
    """No credentials anywhere and an endpoint nobody listens on: the wizard says the endpoint
    cannot be reached, not that credentials are missing."""
    from advisor.session import AdvisorSession

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    c = WizardController(AdvisorSession())
    c.dataset_step.uri, c.dataset_step.endpoint_url = (
        "s3://bucket/data/",
        f"http://127.0.0.1:{own_port}",
    )
    assert c.run_profile() and c.wait(20)
    assert c.errors["dataset"].startswith("cannot reach the endpoint http://127.0.0.1:")
    assert "credentials" not in c.errors["dataset"]


def test_anonymous_access_sends_unsigned_requests(wizard: Any) -> None:
    location = DatasetLocation("s3://public-bucket/data/", anonymous=True)
    assert location.reader_config().unsigned
    assert not DatasetLocation("s3://public-bucket/data/").reader_config().unsigned
    wizard.dataset_panel.anonymous.value = True
    assert wizard.controller.dataset_step.anonymous

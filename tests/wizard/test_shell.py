"""The wizard around its steps, headless: the shell (views.py) and its stylesheet, the
controller's navigation, one background job at a time and the topics it announces, and whole
walks through every step, with the scripted session and with the real one on the small demo."""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from advisor.core.workload import Workload
from advisor.demo.server import S3Endpoint
from advisor.wizard.context import Topic
from advisor.wizard.controller import STEPS, WizardController
from advisor.wizard.jobs import JobRunner, JobRunningError
from advisor.wizard.package_data import PackageDataMissingError
from tests.wizard.conftest import WIDGET_WARNINGS, FakeSession

pytestmark = WIDGET_WARNINGS


def test_the_stylesheet_ships_as_package_data(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.wizard import views

    css = views.stylesheet()
    assert ".la-wizard {" in css and "var(--jp-ui-font-color1)" in css
    monkeypatch.setattr(views, "STYLESHEET", "no-such-style.css")
    with pytest.raises(PackageDataMissingError, match=r"stylesheet.*reinstall"):
        views.stylesheet()


def test_the_controller_and_its_steps_import_no_widgets() -> None:
    """Headless: the controller runs where the wizard extra is not installed."""
    code = (
        "import sys; import advisor.wizard.controller; "
        "sys.exit(sorted(m for m in ('ipywidgets', 'plotly') if m in sys.modules) or 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_wizard_shows_before_torch_is_imported() -> None:
    """`%advisor` draws the wizard without importing torch (about 1.5 s on 2 cores): the rules,
    the records and the session load without it; the trial imports it when it runs."""
    code = (
        "import sys; import advisor.wizard, advisor.session, advisor.decide.recommend; "
        "sys.exit('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_job_runner_runs_one_job_at_a_time() -> None:
    runner = JobRunner("test-job-runner")
    release, calls = threading.Event(), []

    def work(cancel: threading.Event) -> None:
        release.wait(5)
        if cancel.is_set():
            raise RuntimeError("stopped")

    runner.start(
        "slow",
        work,
        started=lambda: calls.append("started"),
        failed=lambda exc: calls.append(f"failed: {exc}"),
        ended=lambda: calls.append("ended"),
    )
    assert runner.busy and runner.job == "slow" and calls == ["started"]
    assert any(t.name == "test-job-runner-slow" for t in threading.enumerate())
    with pytest.raises(JobRunningError, match="slow is still running") as refused:
        runner.start("second", work, started=calls.clear, failed=print, ended=calls.clear)
    assert refused.value.running == "slow"
    assert runner.cancel() == "slow"
    release.set()
    assert runner.wait(5) and not runner.busy and runner.cancel() is None
    assert calls == ["started", "failed: stopped", "ended"]
    assert runner.future is not None and runner.future.done()


def test_listeners_hear_topics_that_read_as_their_names() -> None:
    c = WizardController(FakeSession())  # type: ignore[arg-type]
    heard: list[Topic] = []
    c.subscribe(heard.append)
    assert c.run_hardware()
    assert heard == [Topic.ERROR, Topic.HARDWARE] and heard == ["error", "hardware"]
    assert (
        all(isinstance(topic, Topic) for topic in heard) and f"{Topic.TRIAL_POINT}" == "trial_point"
    )


@pytest.mark.slow
def test_full_flow_with_the_scripted_session(wizard: Any, tmp_path: Path) -> None:
    c = wizard.controller
    dataset, hardware, workload, trial, recommendation, export = (
        wizard.dataset_panel,
        wizard.hardware_panel,
        wizard.workload_panel,
        wizard.trial_panel,
        wizard.recommendation_panel,
        wizard.export_panel,
    )
    dataset.demo_button.click()
    assert c.wait(10)
    assert dataset.uri.value == "s3://loader-advisor-demo/small-images/"
    assert dataset.endpoint.value == "http://127.0.0.1:9" and c.profile is not None
    wizard.next_button.click()
    assert wizard.body.children[0]._dom_classes == ("la-step-hardware",)
    assert "no GPU found" in hardware.hardware_summary.value
    hardware.target_gpu.value = "A100-80GB"
    assert c.hardware is not None and c.hardware.planned and "A100-80GB" in c.hardware.target_gpu
    assert hardware.hardware_summary.value.count("class='la-card la-gpu'") == 1
    assert "planned 0: <span class='la-value'>A100-80GB" in hardware.hardware_summary.value
    hardware.gpu_count.value = 8
    assert hardware.hardware_summary.value.count("class='la-card la-gpu'") == 8
    assert c.workload_step.form.gpus_per_node == "8"  # the job's size follows the planned machine
    wizard.next_button.click()
    assert c.step_name == "workload"
    workload.samples_per_s.value = "fast"
    assert "must be a number" in workload.workload_errors.value
    wizard.next_button.click()
    assert c.step_name == "workload" and "fields marked below" in wizard.error.value
    # the field's own error is shown once, beside the fields, not again at the top
    assert "samples/s per GPU" in workload.workload_errors.value
    assert "samples/s per GPU" not in wizard.error.value
    workload.samples_per_s.value = "250"
    workload.batch_size.value = "64"
    assert "one GPU consumes 250 samples/s" in workload.workload_errors.value
    wizard.next_button.click()
    assert c.step_name == "trial"
    assert c.session.workload == Workload(consumer_rate=250.0, batch_size=64, gpus_per_node=8)
    trial.trial_seconds.value = 5
    trial.run_trial_button.click()
    assert c.wait(20)
    medians, demand = wizard.trial_figure.data
    assert list(medians.x) == [0, 2]  # one point per count
    assert list(demand.y) == [250, 250]
    wizard.next_button.click()
    assert c.step_name == "recommendation"
    assert (
        "num_workers" in recommendation.cards.value and "<td>W-1</td>" in recommendation.cards.value
    )
    assert "DataLoader(dataset, num_workers=2, pin_memory=False)" in recommendation.headline.value
    assert "la-taken'>W-1<" in recommendation.path_taken.value
    # the best count's median: 2 workers' slices read 300 and 310
    assert list(wizard.supply_figure.data[0].y) == [300.0, 305.0, 250.0]
    wizard.next_button.click()
    assert c.step_name == "export"
    assert "make_dataloader" in export.module_preview.value
    export.save_dir.value = str(tmp_path)
    export.save_stem.value = "my loader"
    export.save_button.click()
    assert "not a Python module name" in wizard.error.value
    export.save_stem.value = "my_loader"
    export.save_button.click()
    assert (tmp_path / "my_loader.py").exists() and "my_loader.py" in export.saved.value
    href = export.download.value.split("href='", 1)[1].split("'", 1)[0]
    assert base64.b64decode(href.split(",", 1)[1]).startswith(b"def make_dataloader")
    wizard.back_button.click()
    assert c.step_name == "recommendation"


def test_a_second_job_is_refused_while_one_runs(wizard: Any) -> None:
    c = wizard.controller
    c.session.step_s = 0.05
    wizard.dataset_panel.uri.value = "s3://bucket/data/"
    assert c.run_profile()
    assert not c.run_profile()
    assert "still running" in c.errors["dataset"]
    c.cancel()
    assert c.wait(5)


def test_step_indicator_and_classes(wizard: Any) -> None:
    current = [p.description for p in wizard.pills if "la-current" in p._dom_classes]
    assert current == ["1 Dataset"]
    classes = {box._dom_classes[0] for box in wizard.step_boxes.values()}
    assert classes == {f"la-step-{name}" for name in STEPS}
    buttons = [
        wizard.dataset_panel.demo_button,
        wizard.dataset_panel.profile_button,
        wizard.next_button,
        wizard.back_button,
    ]
    buttons += [
        wizard.trial_panel.run_trial_button,
        wizard.cancel_button,
        wizard.export_panel.save_button,
    ]
    assert [b._dom_classes[0] for b in buttons] == [
        "la-btn-demo",
        "la-btn-profile",
        "la-btn-next",
        "la-btn-back",
        "la-btn-run-trial",
        "la-btn-cancel",
        "la-btn-save",
    ]
    assert "la-input-uri" in wizard.dataset_panel.uri._dom_classes


def test_pills_revisit_reached_steps_and_stale_status_does_not_follow(wizard: Any) -> None:
    c = wizard.controller
    wizard.dataset_panel.demo_button.click()
    assert c.wait(10) and "profile done" in c.message
    wizard.next_button.click()
    assert c.step_name == "hardware" and c.message == "" and c.progress == 0.0
    assert wizard.status_row.layout.display == "none"  # nothing stale beside any button
    assert wizard.pills[2].disabled is not False or c.furthest == 1
    wizard.pills[0].click()  # back to the dataset from its pill
    assert c.step_name == "dataset"
    wizard.pills[1].click()  # and forward again to a step reached before
    assert c.step_name == "hardware"
    assert wizard.pills[3].disabled and not c.visit(3)  # not reached yet


def test_every_step_change_scrolls_the_wizard_top_into_view(wizard: Any) -> None:
    c = wizard.controller
    wizard.dataset_panel.demo_button.click()
    assert c.wait(10)
    wizard.next_button.click()
    script = wizard.scroller.outputs[0]["data"]["application/javascript"]
    assert "scrollIntoView" in script and "closest('.la-wizard')" in script
    wizard.back_button.click()
    assert wizard.scroller.outputs[0]["data"]["application/javascript"] != script  # runs again


def test_progress_sits_beside_the_button_that_started_the_work(wizard: Any) -> None:
    wizard.dataset_panel.demo_button.click()
    assert wizard.controller.wait(10)
    assert wizard.dataset_panel.status_slot.children == (wizard.status_row,)
    assert wizard.status_home.children == ()


@pytest.mark.timeout(120)
def test_real_demo_flow_to_export(real_wizard: Any, small_demo: S3Endpoint, tmp_path: Path) -> None:
    w, c = real_wizard, real_wizard.controller
    dataset, hardware, workload, trial, recommendation, export = (
        w.dataset_panel,
        w.hardware_panel,
        w.workload_panel,
        w.trial_panel,
        w.recommendation_panel,
        w.export_panel,
    )
    dataset.demo_layout.value = "shards"
    dataset.demo_button.click()
    assert c.wait(60), c.errors
    assert c.profile is not None and c.profile.dominant_format == "tar", c.errors
    assert dataset.uri.value == "s3://loader-advisor-demo/shards/"
    assert dataset.endpoint.value == small_demo.url
    bars = dataset.size_chart.outputs[0]["data"]["application/vnd.plotly.v1+json"]["data"][0]
    assert sum(bars["y"]) == c.profile.listed_objects
    w.next_button.click()
    assert "CPU cores" in hardware.hardware_summary.value
    w.next_button.click()
    assert "rate unknown" in workload.workload_errors.value  # nothing typed yet: a valid default
    workload.rate_mode.value = "step"
    workload.step_time.value = "0.1"
    workload.batch_size.value = "16"
    w.next_button.click()
    assert c.step_name == "trial" and c.session.workload.consumer_rate == 160.0
    trial.trial_seconds.value = 3
    trial.run_trial_button.click()
    assert c.wait(60), c.errors
    assert c.trial is not None and c.trial.sweep, c.errors
    measured = {c.num_workers for c in c.trial.counts}
    figure = w.trial_figure
    points = [x for trace in figure.data if "consumes" not in trace.name for x in trace.x]
    assert sorted(points) == sorted(measured)  # one point per count
    w.next_button.click()
    rec = c.recommendation
    assert rec is not None and c.step_name == "recommendation"
    assert c.session.location is not None and c.session.location.is_s3
    # every card that acts on this data: a local copy has no shard size or key prefixes
    shown = rec.shown_decisions()
    assert recommendation.cards.value.count("class='la-card'") == len(shown)
    if rec.data_source == "copy-local":
        assert {d.name for d in rec.decisions} - {d.name for d in shown} <= {
            "shard_size",
            "prefix_layout",
        }
        assert (
            "shard size" not in recommendation.cards.value
            and "key prefixes" not in recommendation.cards.value
        )
    assert w.supply_figure.data[0].y[-1] == 160.0  # training consumes
    assert not recommendation.flow.outputs  # the diagram waits behind "Details"
    recommendation.details_button.value = True
    assert "classDef taken" in recommendation.flow.outputs[0]["data"]["text/vnd.mermaid"]
    markdown = recommendation.flow.outputs[0]["data"]["text/markdown"]
    assert markdown.startswith("```mermaid") and "classDef taken" in markdown
    assert any(f"class {rule}" in markdown or f",{rule}" in markdown for rule in rec.path())
    w.next_button.click()
    assert c.export_step.bundle is not None and "make_dataloader" in export.module_preview.value
    export.save_dir.value = str(tmp_path)
    export.save_button.click()
    module = tmp_path / "dataloader_config.py"
    assert module.exists(), c.errors
    assert "Run it: python dataloader_config.py" in export.saved.value  # how to run it, beside Save
    assert "serve it again" in export.saved.value  # the demo's data: until when it reads
    compile(module.read_text(), str(module), "exec")


def test_the_hardware_step_plans_for_the_node_named(wizard: Any) -> None:
    """Naming the training node (a catalogued instance, then its cores by hand) plans for it,
    this machine kept for the trial; "this machine" plans for it again."""
    c, hardware = wizard.controller, wizard.hardware_panel
    hardware.instance.value = "p4d.24xlarge"
    planned = c.hardware
    assert planned is not None and planned.target is not None
    assert planned.usable_cores == 96 and planned.gpu_count == 8 and planned.measured_cores == 2
    assert "planned for p4d.24xlarge: 96 cores" in hardware.hardware_summary.value
    assert c.workload_step.form.gpus_per_node == "8"  # the node's GPUs are its ranks
    hardware.target_cores.value = 48.0  # a share of the node, say a quota
    assert c.hardware is not None and c.hardware.usable_cores == 48
    hardware.target_cores.value = 0.0
    hardware.instance.value = ""
    assert c.hardware is not None and c.hardware.target is None and c.hardware.usable_cores == 2

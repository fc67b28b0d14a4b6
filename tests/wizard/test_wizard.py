"""Headless tests of the notebook wizard: drive widgets with `.value` / `.click()`, assert on
traits, on the plotly figures' data and on the controller's state.

Two tiers: a scripted stand-in for `AdvisorSession` pins down threading, cancel and navigation
exactly; the real session against the local S3 endpoint covers every error path and the whole
flow on a small demo data set.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from advisor.core.location import DatasetLocation
from advisor.core.units import binary_size
from advisor.core.workload import Workload
from advisor.decide.recommend import Decision
from advisor.demo.server import S3Endpoint
from advisor.measure.hardware import HardwareProfile
from advisor.measure.profile import DatasetProfile, FormatInfo, size_stats
from advisor.measure.trial.results import LoaderPoint, TrialResult, summarise
from advisor.wizard import charts, flow
from advisor.wizard.context import Topic
from advisor.wizard.controller import STEPS, THREAD_PREFIX, WizardController
from advisor.wizard.jobs import JobRunner, JobRunningError
from advisor.wizard.package_data import PackageDataMissingError

pytestmark = [
    # ipywidgets' comm shim warns when there is no kernel; the wizard works without one.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ipywidgets.*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:comm.*"),
]


def _wizard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def _point(workers: int, pinned: bool, rate: float, steady: bool = True) -> Any:
    return SimpleNamespace(
        num_workers=workers,
        pin_memory=pinned,
        prefetch_factor=2 if workers else None,
        samples_per_s=rate,
        steady=steady,
        step="none",
    )


def _profile(uri: str = "s3://bucket/data/") -> DatasetProfile:
    sizes = [1000, 2000, 3000, 70_000, 70_000, 140_000]
    return DatasetProfile(
        uri=uri,
        storage="s3",
        object_count=len(sizes),
        total_bytes=sum(sizes),
        sizes=size_stats(sizes),
        formats=(FormatInfo("jpeg", len(sizes), sum(sizes)),),
        distinct_prefixes=2,
        listed_objects=len(sizes),
    )


class FakeSession:
    """Stands in for AdvisorSession: same methods, scripted results, cancellable slow steps."""

    def __init__(self, fail: BaseException | None = None, step_s: float = 0.01) -> None:
        self.location: DatasetLocation | None = None
        self.credentials = None
        self.workload = Workload()
        self.profile: DatasetProfile | None = None
        self.hardware: HardwareProfile | None = None
        self.trial: Any = None
        self.recommendation: Any = None
        self.trial_dropped: str | None = None  # AdvisorSession: why a stale trial was dropped
        self.demo_layout: str | None = None
        self.fail, self.step_s = fail, step_s
        self.saved: list[tuple[Path, str]] = []

    def history(self) -> Any:  # AdvisorSession's runs so far: none are scripted
        from advisor.diagnosis.history import History

        return History()

    def set_location(
        self, uri: str, endpoint_url: str | None = None, aws_profile: str | None = None, **_: Any
    ) -> DatasetLocation:
        self.location = DatasetLocation(uri, endpoint_url=endpoint_url, profile=aws_profile)
        self.profile = self.trial = self.recommendation = None
        self.demo_layout = None
        return self.location

    def use_demo(self, layout: str = "small-images", progress: Any = None) -> str:
        uri = f"s3://loader-advisor-demo/{layout}/"
        self.set_location(uri, endpoint_url="http://127.0.0.1:9")
        self.demo_layout = layout
        return uri

    def check_location(self) -> None:
        """The scripted endpoint always answers (the real check: the real_wizard tests')."""

    def run_profile(self, progress: Any = None, cancel: threading.Event | None = None) -> Any:
        for i in range(10):
            if self.fail is not None:
                raise self.fail
            if cancel is not None and cancel.is_set():
                break
            if progress:
                progress(f"listed {i}", i / 10)
            time.sleep(self.step_s)
        assert self.location is not None
        self.profile = _profile(self.location.uri)
        return self.profile

    def run_hardware(self, target_gpu: str | None = None, gpu_count: int = 1) -> HardwareProfile:
        hardware = HardwareProfile(cpu_count=2, affinity_cores=2, usable_cores=2)
        if target_gpu:
            hardware = hardware.with_target_gpu(target_gpu, gpu_count)
        self.hardware = hardware
        return hardware

    def set_workload(self, workload: Workload) -> Workload:
        self.workload = workload
        return workload

    def run_trial(
        self, seconds: float = 30.0, progress: Any = None, cancel: threading.Event | None = None
    ) -> Any:
        points, cancelled = [], False
        for i, (workers, pinned) in enumerate([(0, False), (0, True), (2, False), (2, True)] * 50):
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            point = _point(workers, pinned, 100.0 * (workers + 1) + (10 if pinned else 0))
            points.append(point)
            if progress:
                progress(SimpleNamespace(phase="sweep", fraction=i / 200, message="", point=point))
            time.sleep(self.step_s)
        self.trial = TrialResult(
            uri=self.location.uri if self.location else "s3://scripted/",
            seconds_budget=seconds,
            seconds_used=1.0,
            sweep=tuple(points),
            counts=summarise(points),
            cancelled=cancelled,
        )
        return self.trial

    def run_recommend(self) -> Any:
        decision = Decision(
            name="num_workers",
            value=2,
            rationale="two cores",
            rules=("W-1",),
            evidence={"cores": 2},
            confidence="high",
            measured=True,
        )
        self.recommendation = SimpleNamespace(
            decisions=(decision,),
            path=lambda: ["W-1"],
            expected_samples_per_s=300.0,
            measured_samples_per_s=300.0,  # the trial measured what training reads
            num_workers=2,
            pin_memory=False,
            prefetch_factor=2,
            data_source="stream",
            sagemaker_input_mode="FastFile",
            input_bound=False,
            notes=(),
            cost_notes=("~$0.00 in requests",),
            dataloader_kwargs=lambda: {"num_workers": 2, "pin_memory": False},
            applies=lambda decision: True,  # streaming: every decision acts on the data
        )
        return self.recommendation

    def export(self) -> Any:
        session = self

        class Bundle:
            module_source = "def make_dataloader():\n    return None\n"
            json_text = '{"num_workers": 2}'

            def save(self, directory: Path, stem: str) -> tuple[Path, Path]:
                session.saved.append((directory, stem))
                paths = (directory / f"{stem}.py", directory / f"{stem}.json")
                paths[0].write_text(self.module_source)
                paths[1].write_text(self.json_text)
                return paths

        return Bundle()


@pytest.fixture
def wizard() -> Iterator[Any]:
    from advisor.wizard.views import Wizard

    w = Wizard(WizardController(FakeSession()))  # type: ignore[arg-type]
    yield w
    w.controller.close()
    assert not _wizard_threads()


def _profiled(w: Any) -> None:
    w.uri.value = "s3://bucket/data/"
    w.profile_button.click()
    assert w.controller.wait(10)


# --- pure builders -------------------------------------------------------------------------


def test_sizes_read_in_binary_units() -> None:
    assert binary_size(0) == "0 B"
    assert binary_size(1536) == "1.5 KiB"
    assert binary_size(64 * 2**20) == "64 MiB"  # the one formatter (tests/core/test_units.py)
    from advisor.wizard.panels.dataset import profile_rows

    rows = dict(profile_rows(_profile()))
    assert rows["total size"] == "279 KiB"
    assert rows["object size"] == "median 2.9 KiB, p90 68 KiB, p99 137 KiB, max 137 KiB"


def test_size_histogram_has_one_bar_per_bin() -> None:
    figure = charts.size_histogram(_profile())
    bar = figure.data[0]
    assert list(bar.y) == [1, 1, 1, 2, 1]  # 512 B, 1 KiB, 2 KiB, 64 KiB (x2), 128 KiB bins
    assert bar.x[0].startswith("512 B")


def _slice(workers: int, rate: float, steady: bool = True, step: str = "sleep") -> LoaderPoint:
    return LoaderPoint(workers, True, 2 if workers else None, 100, 100 / rate, rate, 1.0, 0.1,
                       10.0, steady=steady, step=step)  # fmt: skip


def test_trial_chart_draws_one_point_per_count_with_its_spread() -> None:
    slices = [_slice(0, 100), _slice(0, 110), _slice(0, 90), _slice(2, 300), _slice(2, 260),
              _slice(2, 280, step="spin"), _slice(3, 150, steady=False)]  # fmt: skip
    figure = charts.trial_chart(summarise(slices), consumer_rate=200)
    medians, bounds, demand = figure.data
    # one point per count: the median of the slower step model's slices, as the text says
    assert list(medians.x) == [0, 2] and list(medians.y) == [100, 280]
    assert list(medians.error_y.array) == [10, 20] and list(medians.error_y.arrayminus) == [10, 20]
    assert medians.marker.symbol == "circle"
    # a count with no steady state is a lower bound: an open marker of its own
    assert list(bounds.x) == [3] and bounds.marker.symbol == "triangle-up-open"
    assert "lower bound" in bounds.name
    assert list(demand.y) == [200, 200] and "training consumes 200 samples/s" in demand.name
    assert figure.layout.showlegend is True
    best = max(summarise(slices), key=lambda c: c.median)
    assert best.median == max(medians.y)  # the chart agrees with "best measured"


def test_trial_chart_without_demand_or_lower_bounds() -> None:
    figure = charts.trial_chart(summarise([_slice(1, 50)]))
    assert [trace.name for trace in figure.data] == [
        "median of the slices (bar: slowest to fastest)"
    ]


def test_the_trial_chart_before_a_trial_says_what_fills_it() -> None:
    """No counts yet: no axes from -1 but the counts a trial measures first, and a hint; a
    chart with counts has no hint."""
    empty = charts.trial_chart([], consumer_rate=300)
    assert list(empty.layout.xaxis.range) == [-0.5, 4.5]
    assert list(empty.layout.yaxis.range) == [0, 450]
    assert [a.text for a in empty.layout.annotations] == [
        "Run the live trial: each num_workers appears here as it is measured"
    ]
    assert not charts.trial_chart(summarise([_slice(1, 50)])).layout.annotations


def test_throughput_chart_skips_unknowns() -> None:
    figure = charts.throughput_chart(500.0, None, 450.0)
    assert list(figure.data[0].x) == ["loader (expected)", "loader (best measured)"]
    packed = charts.throughput_chart(500.0, None, 450.0, "a packed sample")
    assert list(packed.data[0].x)[1] == "loader (best measured on a packed sample)"


def test_figure_bundle_is_plotly_mime() -> None:
    bundle = charts.figure_bundle(charts.throughput_chart(1.0, 2.0))
    spec = bundle["data"]["application/vnd.plotly.v1+json"]
    assert spec["data"][0]["type"] == "bar" and spec["config"]["displaylogo"] is False


def test_flow_highlights_the_path() -> None:
    source = "flowchart TD\n  SRC1 --> W1\n  W1 --> P2\n"
    text = flow.flow_markdown(["SRC1", "W1", "NOPE"], source)
    assert text.startswith("```mermaid\nflowchart TD")
    assert "class SRC1,W1 taken" in text and "classDef taken" in text


def test_packaged_diagram_is_the_one_in_the_docs() -> None:
    """docs/decision-flow.md embeds the diagram the wizard ships; edit both together."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "decision-flow.md"
    assert flow.mermaid_source(doc.read_text(encoding="utf-8")) == flow.diagram_source()
    assert flow.flow_mermaid(["SRC-1"]).endswith("class SRC-1 taken\n")


def test_a_missing_diagram_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flow, "DIAGRAM_RESOURCE", "no-such-diagram.mmd")
    with pytest.raises(flow.DiagramMissingError, match="reinstall"):
        flow.flow_bundle(["SRC-1"])


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


# --- controller with the scripted session --------------------------------------------------


def test_starts_on_dataset_and_next_waits_for_a_profile(wizard: Any) -> None:
    assert wizard.body.children[0]._dom_classes == ("la-step-dataset",)
    assert wizard.next_button.disabled
    wizard.next_button.click()
    assert wizard.controller.step == 0
    _profiled(wizard)
    assert "6" in wizard.profile_summary.value  # object count
    bundle = wizard.size_chart.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert bundle["data"][0]["y"] == [1, 1, 1, 2, 1]
    assert not wizard.next_button.disabled and wizard.progress.value == 1.0


def test_bad_uri_is_an_inline_error_and_retry_works(wizard: Any) -> None:
    wizard.uri.value = "gs://bucket/data/"
    wizard.profile_button.click()
    assert "unsupported URI scheme" in wizard.error.value
    assert not _wizard_threads()
    _profiled(wizard)
    assert wizard.error.value == "" and wizard.controller.profile is not None


def test_engine_error_in_the_worker_is_shown_and_the_thread_ends() -> None:
    from advisor.wizard.views import Wizard

    session = FakeSession(fail=PermissionError("AccessDenied on s3://bucket/data/"))
    w = Wizard(WizardController(session))  # type: ignore[arg-type]
    _profiled(w)
    assert "access denied" in w.error.value
    assert not w.controller.busy and not _wizard_threads()
    assert not w.profile_button.disabled  # the user can correct and retry


@pytest.mark.slow
def test_full_flow_with_the_scripted_session(wizard: Any, tmp_path: Path) -> None:
    c = wizard.controller
    wizard.demo_button.click()
    assert c.wait(10)
    assert wizard.uri.value == "s3://loader-advisor-demo/small-images/"
    assert wizard.endpoint.value == "http://127.0.0.1:9" and c.profile is not None
    wizard.next_button.click()
    assert wizard.body.children[0]._dom_classes == ("la-step-hardware",)
    assert "no GPU found" in wizard.hardware_summary.value
    wizard.target_gpu.value = "A100-80GB"
    assert c.hardware is not None and c.hardware.planned and "A100-80GB" in c.hardware.target_gpu
    assert wizard.hardware_summary.value.count("class='la-card la-gpu'") == 1
    assert "planned 0: <span class='la-value'>A100-80GB" in wizard.hardware_summary.value
    wizard.gpu_count.value = 8
    assert wizard.hardware_summary.value.count("class='la-card la-gpu'") == 8
    assert c.workload_form.gpus_per_node == "8"  # the job's size follows the planned machine
    wizard.next_button.click()
    assert c.step_name == "workload"
    wizard.samples_per_s.value = "fast"
    assert "must be a number" in wizard.workload_errors.value
    wizard.next_button.click()
    assert c.step_name == "workload" and "fields marked below" in wizard.error.value
    # the field's own error is shown once, beside the fields, not again at the top
    assert "samples/s per GPU" in wizard.workload_errors.value
    assert "samples/s per GPU" not in wizard.error.value
    wizard.samples_per_s.value = "250"
    wizard.batch_size.value = "64"
    assert "one GPU consumes 250 samples/s" in wizard.workload_errors.value
    wizard.next_button.click()
    assert c.step_name == "trial"
    assert c.session.workload == Workload(consumer_rate=250.0, batch_size=64, gpus_per_node=8)
    wizard.trial_seconds.value = 5
    wizard.run_trial_button.click()
    assert c.wait(20)
    medians, demand = wizard.trial_figure.data
    assert list(medians.x) == [0, 2]  # one point per count
    assert list(demand.y) == [250, 250]
    wizard.next_button.click()
    assert c.step_name == "recommendation"
    assert "num_workers" in wizard.cards.value and "<td>W-1</td>" in wizard.cards.value
    assert "DataLoader(dataset, num_workers=2, pin_memory=False)" in wizard.headline.value
    assert "la-taken'>W-1<" in wizard.path_taken.value
    # the best count's median: 2 workers' slices read 300 and 310
    assert list(wizard.supply_figure.data[0].y) == [300.0, 305.0, 250.0]
    wizard.next_button.click()
    assert c.step_name == "export"
    assert "make_dataloader" in wizard.module_preview.value
    wizard.save_dir.value = str(tmp_path)
    wizard.save_stem.value = "my loader"
    wizard.save_button.click()
    assert "not a Python module name" in wizard.error.value
    wizard.save_stem.value = "my_loader"
    wizard.save_button.click()
    assert (tmp_path / "my_loader.py").exists() and "my_loader.py" in wizard.saved.value
    href = wizard.download.value.split("href='", 1)[1].split("'", 1)[0]
    assert base64.b64decode(href.split(",", 1)[1]).startswith(b"def make_dataloader")
    wizard.back_button.click()
    assert c.step_name == "recommendation"


def test_workload_step_time_mode() -> None:
    c = WizardController(FakeSession())  # type: ignore[arg-type]
    c.workload_form.mode = "step"
    c.workload_form.step_time_s = "0.5"
    c.workload_form.batch_size = "128"
    c.workload_form.transform = "not a callable"
    assert c.parse_workload() is None and "module:callable" in c.field_errors["transform"]
    c.workload_form.transform = "mypkg.transforms:decode"
    workload = c.parse_workload()
    assert workload is not None and workload.consumer_rate == 256.0
    c.workload_form.gpus_per_node = "65"
    assert c.parse_workload() is None
    assert "must be from 1 to 64 GPUs, got" in c.field_errors["gpus_per_node"]
    c.workload_form.gpus_per_node = "0"
    assert c.parse_workload() is None
    assert "must be from 1 to 64 GPUs, got" in c.field_errors["gpus_per_node"]


def test_cancel_stops_the_trial_promptly(wizard: Any) -> None:
    c = wizard.controller
    c.session.step_s = 0.05  # 200 points would take 10 s
    _profiled(wizard)
    c.next(), c.next(), c.next()
    assert c.step_name == "trial"
    wizard.run_trial_button.click()
    deadline = time.monotonic() + 5
    while len(c.trial_points) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not wizard.cancel_button.disabled and wizard.next_button.disabled
    started = time.monotonic()
    wizard.cancel_button.click()
    assert c.wait(2) and time.monotonic() - started < 1.0
    assert c.trial.cancelled and "cancelled" in c.message
    assert len(wizard.trial_figure.data[0].x) >= 1
    assert not _wizard_threads() and wizard.cancel_button.disabled


def test_a_second_job_is_refused_while_one_runs(wizard: Any) -> None:
    c = wizard.controller
    c.session.step_s = 0.05
    wizard.uri.value = "s3://bucket/data/"
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
    buttons = [wizard.demo_button, wizard.profile_button, wizard.next_button, wizard.back_button]
    buttons += [wizard.run_trial_button, wizard.cancel_button, wizard.save_button]
    assert [b._dom_classes[0] for b in buttons] == [
        "la-btn-demo",
        "la-btn-profile",
        "la-btn-next",
        "la-btn-back",
        "la-btn-run-trial",
        "la-btn-cancel",
        "la-btn-save",
    ]
    assert "la-input-uri" in wizard.uri._dom_classes


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


# --- the real session against the local S3 endpoint ------------------------------------------


@pytest.fixture
def real_wizard() -> Iterator[Any]:
    from advisor.session import AdvisorSession
    from advisor.wizard.views import Wizard

    before = set(threading.enumerate())
    w = Wizard(WizardController(AdvisorSession()))
    yield w
    w.controller.close()
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [t.name for t in set(threading.enumerate()) - before]
    assert not left, f"threads left running: {left}"


def _profile_error(w: Any, uri: str, endpoint: str = "") -> str:
    w.uri.value, w.endpoint.value = uri, endpoint
    w.profile_button.click()
    assert w.controller.wait(60)
    assert w.controller.profile is None and not w.controller.busy
    assert not w.profile_button.disabled and w.next_button.disabled
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
def test_real_unreachable_endpoint(real_wizard: Any) -> None:
    from advisor.demo.server import free_ports

    closed = f"http://127.0.0.1:{free_ports(1)[0]}"
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
    real_wizard.profile_button.click()
    assert real_wizard.controller.wait(60)
    assert real_wizard.controller.profile is not None and real_wizard.error.value == ""


@pytest.fixture
def small_demo(s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Endpoint]:
    """The kernel-side demo lookup pointed at SMALL_DEMO on the test endpoint."""
    from advisor.demo import stop_demo
    from tests.browser.browser_helpers import small_demo_env

    for name, value in small_demo_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    stop_demo()  # forget a demo found earlier in this process
    yield s3_endpoint
    stop_demo()


@pytest.mark.timeout(120)
def test_real_demo_flow_to_export(real_wizard: Any, small_demo: S3Endpoint, tmp_path: Path) -> None:
    w, c = real_wizard, real_wizard.controller
    w.demo_layout.value = "shards"
    w.demo_button.click()
    assert c.wait(60), c.errors
    assert c.profile is not None and c.profile.dominant_format == "tar", c.errors
    assert w.uri.value == "s3://loader-advisor-demo/shards/"
    assert w.endpoint.value == small_demo.url
    bars = w.size_chart.outputs[0]["data"]["application/vnd.plotly.v1+json"]["data"][0]
    assert sum(bars["y"]) == c.profile.listed_objects
    w.next_button.click()
    assert "CPU cores" in w.hardware_summary.value
    w.next_button.click()
    assert "rate unknown" in w.workload_errors.value  # nothing typed yet: a valid default
    w.rate_mode.value = "step"
    w.step_time.value = "0.1"
    w.batch_size.value = "16"
    w.next_button.click()
    assert c.step_name == "trial" and c.session.workload.consumer_rate == 160.0
    w.trial_seconds.value = 3
    w.run_trial_button.click()
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
    assert w.cards.value.count("class='la-card'") == len(shown)
    if rec.data_source == "copy-local":
        assert {d.name for d in rec.decisions} - {d.name for d in shown} <= {
            "shard_size",
            "prefix_layout",
        }
        assert "shard size" not in w.cards.value and "key prefixes" not in w.cards.value
    assert w.supply_figure.data[0].y[-1] == 160.0  # training consumes
    assert not w.flow.outputs  # the diagram waits behind "Details"
    w.recommendation_panel.details_button.value = True
    assert "classDef taken" in w.flow.outputs[0]["data"]["text/vnd.mermaid"]
    markdown = w.flow.outputs[0]["data"]["text/markdown"]
    assert markdown.startswith("```mermaid") and "classDef taken" in markdown
    assert any(f"class {rule}" in markdown or f",{rule}" in markdown for rule in rec.path())
    w.next_button.click()
    assert c.export_bundle is not None and "make_dataloader" in w.module_preview.value
    w.save_dir.value = str(tmp_path)
    w.save_button.click()
    module = tmp_path / "dataloader_config.py"
    assert module.exists(), c.errors
    assert "Run it: python dataloader_config.py" in w.saved.value  # how to run it, beside Save
    assert "serve it again" in w.saved.value  # the demo's data: until when it reads
    compile(module.read_text(), str(module), "exec")


@pytest.mark.timeout(60)
def test_real_trial_cancel_leaves_nothing_running(real_wizard: Any, small_demo: S3Endpoint) -> None:
    c = real_wizard.controller
    c.use_demo("small-images")
    assert c.wait(60) and c.profile is not None, c.errors
    c.next(), c.next(), c.next()
    assert c.run_trial(60)
    time.sleep(0.3)
    started = time.monotonic()
    real_wizard.cancel_button.click()
    assert c.wait(15), "the trial did not stop"
    assert time.monotonic() - started < 15
    assert c.trial is not None and not c.busy


def test_headline_names_the_reader_setting_when_streaming() -> None:
    from advisor.wizard.panels.recommendation import headline

    rec = SimpleNamespace(
        data_source="stream",
        sagemaker_input_mode="FastFile",
        input_bound=None,
        notes=(),
        cost_notes=(),
        decisions=(Decision("requests_in_flight", 96, "Little's law", ("RD-1",)),),
        requests_in_flight=96,
        num_workers=2,
        pin_memory=True,
        prefetch_factor=None,
        expected_samples_per_s=500.0,
        dataloader_kwargs=lambda: {"num_workers": 2},
    )
    shown = headline(rec, None, None)  # type: ignore[arg-type]
    assert "ReaderConfig(max_inflight_requests=96)</code> per worker" in shown
    copied = SimpleNamespace(**{**vars(rec), "data_source": "copy-local", "decisions": ()})
    assert "ReaderConfig" not in headline(copied, None, None)  # type: ignore[arg-type]


def test_the_workers_card_shows_the_measured_table_beside_the_model() -> None:
    from advisor.wizard.panels.recommendation import decision_card

    table = {
        "0": {
            "median": 410.0,
            "low": 400.0,
            "high": 420.0,
            "lower_bound": False,
            "predicted": 450.0,
        },
        "1": {"median": 90.0, "low": 80.0, "high": 95.0, "lower_bound": True, "predicted": 380.0},
    }
    decision = Decision(
        "num_workers", 0, "0 worker(s): the best measured.", ("NW-3",),
        {"sweep_table": table, "prediction_error": 0.098}, "high", True,
    )  # fmt: skip
    card = decision_card(decision)
    assert "<table class='la-table la-sweep'>" in card
    assert "<td>0</td><td>410 samples/s</td><td>400-420</td><td>450 samples/s</td>" in card
    assert "<td>1</td><td>at least 90.0 samples/s</td><td>80.0-95.0</td>" in card  # a lower bound
    assert "<th>Prediction error</th><td>10%</td>" in card and "sweep_table" not in card
    assert "<details class='la-details'><summary>evidence</summary>" in card  # folded


def test_pills_revisit_reached_steps_and_stale_status_does_not_follow(wizard: Any) -> None:
    c = wizard.controller
    wizard.demo_button.click()
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
    wizard.demo_button.click()
    assert c.wait(10)
    wizard.next_button.click()
    script = wizard.scroller.outputs[0]["data"]["application/javascript"]
    assert "scrollIntoView" in script and "closest('.la-wizard')" in script
    wizard.back_button.click()
    assert wizard.scroller.outputs[0]["data"]["application/javascript"] != script  # runs again


def test_progress_sits_beside_the_button_that_started_the_work(wizard: Any) -> None:
    wizard.demo_button.click()
    assert wizard.controller.wait(10)
    assert wizard.dataset_panel.status_slot.children == (wizard.status_row,)
    assert wizard.status_home.children == ()


def test_no_s3_only_cards_for_a_local_folder() -> None:
    from advisor.wizard.panels.recommendation import shown_decisions

    decisions = tuple(
        Decision(name, 1, "why", ("R-1",))
        for name in ("num_workers", "shard_size", "requests_in_flight", "prefix_layout")
    )
    rec = SimpleNamespace(decisions=decisions, applies=lambda d: True)
    assert [d.name for d in shown_decisions(rec, is_s3=False)] == ["num_workers"]  # type: ignore[arg-type]
    assert len(shown_decisions(rec, is_s3=True)) == 4  # type: ignore[arg-type]


def test_headline_gives_the_measured_wait_at_the_recommended_count() -> None:
    from advisor.headline import headline_lines

    rec = SimpleNamespace(num_workers=2, pin_memory=True, prefetch_factor=2, data_source="stream",
                          expected_samples_per_s=400.0, measured_samples_per_s=255.0)  # fmt: skip
    trial = SimpleNamespace(counts=summarise([_slice(2, 255), _slice(0, 31)]))
    lines = headline_lines(rec, trial, 300.0)  # type: ignore[arg-type]
    assert (
        lines[0] == "Change: DataLoader(num_workers=2, pin_memory=True, prefetch_factor=2), "
        "reading from stream."
    )
    assert lines[1] == (
        "Measured at num_workers=2: 255 samples/s of the 300 samples/s one GPU consumes: "
        "the training waits for data 15% of each step."
    )
    bounded = SimpleNamespace(counts=summarise([_slice(2, 150, steady=False)]))
    assert headline_lines(rec, bounded, 300.0)[1].endswith(  # type: ignore[arg-type]
        "at least 150 samples/s of the 300 samples/s one GPU consumes: the training waits for "
        "data at most 50% of each step."
    )
    untried = headline_lines(rec, None, 300.0)  # type: ignore[arg-type]
    assert "not measured" in untried[1]
    # the model decided (the trial read the listed objects, training reads something else):
    # the trial's figure at that count is not what training will get
    modelled = SimpleNamespace(**{**vars(rec), "measured_samples_per_s": None})
    predicted = headline_lines(modelled, trial, 300.0)  # type: ignore[arg-type]
    assert predicted[1] == (
        "Expected at num_workers=2: 400 samples/s (predicted: the trial did not read what "
        "training will read; see num_workers)."
    )


def test_headline_with_the_users_loader_measured() -> None:
    from advisor.headline import headline_lines

    rec = SimpleNamespace(num_workers=2, pin_memory=True, prefetch_factor=2, data_source="stream",
                          expected_samples_per_s=400.0, measured_samples_per_s=290.0)  # fmt: skip
    trial = SimpleNamespace(counts=summarise([_slice(2, 290)]))
    spread = SimpleNamespace
    diagnosis = SimpleNamespace(
        summary=SimpleNamespace(  # the whole run's figures lead; the windows give the range
            overall_samples_per_s=31.0,
            overall_wait_share=0.78,
            samples_per_s=spread(median=35.0),
            wait_share=spread(median=0.7),
        ),
        verdict=None,
    )
    lines = headline_lines(
        rec, trial, 300.0, diagnosis, ("num_workers 0 -> 2", "the native reader")
    )  # type: ignore[arg-type]
    assert lines[0] == "Change: num_workers 0 -> 2, the native reader."
    assert lines[1].startswith(
        "Your loader 31.0 -> 290 samples/s, data wait 78% -> 3% of each step"
    )


def test_headline_leads_with_both_loaders_in_the_same_loop() -> None:
    """Compared (the user's loader and the exported one, interleaved), the headline gives
    their before, after and ratio, not the trial's figure; then the user's bottleneck."""
    from advisor.decide.rules.bottleneck import Bottleneck
    from advisor.diagnosis import Comparison
    from advisor.headline import headline_lines

    def run(rate: float, waits: float) -> Any:
        summary = SimpleNamespace(overall_samples_per_s=rate, overall_wait_share=waits)
        return SimpleNamespace(summary=summary, verdict=None, bottleneck=None)

    rec = SimpleNamespace(num_workers=2, pin_memory=True, prefetch_factor=2, data_source="stream",
                          expected_samples_per_s=400.0, measured_samples_per_s=290.0,
                          bottleneck=None)  # fmt: skip
    trial = SimpleNamespace(counts=summarise([_slice(2, 290)]))
    comparison = Comparison(
        (run(31.0, 0.78), run(33.0, 0.76)), (run(130.0, 0.03), run(128.0, 0.04))
    )
    limit = Bottleneck("storage", 31.0, (), "78% of each step waits", "loop")
    mine = SimpleNamespace(summary=comparison.before[0].summary, verdict=None, bottleneck=limit)
    lines = headline_lines(
        rec, trial, 300.0, mine, ("num_workers 0 -> 2", "the native reader"), comparison
    )  # type: ignore[arg-type]
    assert lines[0] == "Change: num_workers 0 -> 2, the native reader."
    assert lines[1].startswith(
        "Your loader -> the recommended one, in your loop: 32.0 -> 129 samples/s (4.0"
    )
    assert "data wait 77% -> 4% of each step" in lines[1] and "290" not in lines[1]
    assert lines[-1] == "Your loader's bottleneck: storage: 78% of each step waits."


def test_workload_names_the_users_loader_and_step(wizard: Any) -> None:
    c = wizard.controller
    wizard.workload_panel.loader.value = "my loader"
    assert "neither a notebook variable nor module:function" in wizard.workload_errors.value
    wizard.workload_panel.loader.value = "tests_loader:make"
    wizard.workload_panel.loader_step.value = "train_step"
    assert c.workload_step.field_errors == {}
    wizard.workload_panel.loader.value = ""
    assert "give your loader too" in c.workload_step.field_errors["loader_step"]


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
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No credentials anywhere and an endpoint nobody listens on: the wizard says the endpoint
    cannot be reached, not that credentials are missing."""
    from advisor.demo.server import free_ports
    from advisor.session import AdvisorSession

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    c = WizardController(AdvisorSession())
    c.uri, c.endpoint_url = "s3://bucket/data/", f"http://127.0.0.1:{free_ports(1)[0]}"
    assert c.run_profile() and c.wait(20)
    assert c.errors["dataset"].startswith("cannot reach the endpoint http://127.0.0.1:")
    assert "credentials" not in c.errors["dataset"]


def test_anonymous_access_sends_unsigned_requests(wizard: Any) -> None:
    location = DatasetLocation("s3://public-bucket/data/", anonymous=True)
    assert location.reader_config().unsigned
    assert not DatasetLocation("s3://public-bucket/data/").reader_config().unsigned
    wizard.dataset_panel.anonymous.value = True
    assert wizard.controller.dataset_step.anonymous


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

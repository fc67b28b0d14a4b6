"""What the wizard's tests share: `wizard` (the widgets over a scripted stand-in for
`AdvisorSession` that pins down threading, cancel and navigation exactly), `real_wizard` (the
real session; the tests that use it need the local S3 endpoint) and `small_demo` (the demo's
lookup pointed at a small demo on the test endpoint), and the scripted results they show.

Tests drive widgets with `.value` / `.click()` and assert on traits, on the plotly figures'
data and on the controller's state, each through its step's panel (`wizard.dataset_panel.uri`)
or step (`wizard.controller.workload_step.form`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import Decision
from advisor.demo.server import S3Endpoint
from advisor.measure.hardware import HardwareProfile
from advisor.measure.profile import DatasetProfile, FormatInfo, size_stats
from advisor.measure.trial.results import LoaderPoint, TrialResult, summarise
from advisor.wizard.controller import THREAD_PREFIX, WizardController

# ipywidgets' comm shim warns when there is no kernel; the wizard works without one.
WIDGET_WARNINGS = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ipywidgets.*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:comm.*"),
]


def wizard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def sweep_point(workers: int, pinned: bool, rate: float, steady: bool = True) -> Any:
    return SimpleNamespace(
        num_workers=workers,
        pin_memory=pinned,
        prefetch_factor=2 if workers else None,
        samples_per_s=rate,
        steady=steady,
        step="none",
    )


def scripted_profile(uri: str = "s3://bucket/data/") -> DatasetProfile:
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
        self.machine: HardwareProfile | None = None  # AdvisorSession: where the trial runs
        self.trial: Any = None
        self.recommendation: Any = None
        self.trial_dropped: str | None = None  # AdvisorSession: why a stale trial was dropped
        self.demo_layout: str | None = None
        self.fail, self.step_s = fail, step_s
        self.saved: list[tuple[Path, str]] = []

    def history(self) -> Any:  # AdvisorSession's runs so far: none are scripted
        from advisor.decide.history import History

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
        self.profile = scripted_profile(self.location.uri)
        return self.profile

    def run_hardware(
        self, target_gpu: str | None = None, gpu_count: int = 1, target: Any = None
    ) -> HardwareProfile:
        hardware = machine = HardwareProfile(cpu_count=2, affinity_cores=2, usable_cores=2)
        if target is not None:
            hardware = machine.planned_for(target, gpu_count)
        elif target_gpu:
            hardware = hardware.with_target_gpu(target_gpu, gpu_count)
        self.hardware, self.machine = hardware, machine
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
            point = sweep_point(workers, pinned, 100.0 * (workers + 1) + (10 if pinned else 0))
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
    assert not wizard_threads()


def profiled(w: Any) -> None:
    w.dataset_panel.uri.value = "s3://bucket/data/"
    w.dataset_panel.profile_button.click()
    assert w.controller.wait(10)


def loader_slice(
    workers: int, rate: float, steady: bool = True, step: str = "sleep"
) -> LoaderPoint:
    return LoaderPoint(workers, True, 2 if workers else None, 100, 100 / rate, rate, 1.0, 0.1,
                       10 * 2**20, steady=steady, step=step)  # fmt: skip


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

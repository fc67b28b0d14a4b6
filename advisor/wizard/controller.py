"""The wizard's state and actions, with no widgets: the whole flow runs headless.

`WizardController` holds what the user typed and where they are, and drives one
`AdvisorSession`; it adds no advice of its own. Long work (demo start-up, profile, trial) runs in
one worker thread at a time so the kernel stays responsive; progress and results reach the views
through `subscribe` callbacks (called from that thread too), `cancel()` stops the work through a
`threading.Event` the engine polls, and `wait(timeout)` lets tests block until it is done.
Every engine error becomes one plain sentence (`advisor.core.errors.describe`) in `errors[step]`.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.core.bounds import Range, TrialBudget, range_of
from advisor.core.errors import describe
from advisor.core.workload import STEP_TIME_S, Workload

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation
    from advisor.export import ExportBundle
    from advisor.measure.hardware import HardwareProfile
    from advisor.measure.profile import DatasetProfile
    from advisor.measure.trial.data import TrialEvent
    from advisor.measure.trial.results import LoaderPoint, TrialResult
    from advisor.session import AdvisorSession

STEPS = ("dataset", "hardware", "workload", "trial", "recommendation", "export")
STEP_TITLES = {
    "dataset": "Dataset",
    "hardware": "Hardware",
    "workload": "Workload",
    "trial": "Live trial",
    "recommendation": "Recommendation",
    "export": "Export",
}
THREAD_PREFIX = "loader-advisor-wizard"
DEFAULT_TRIAL_SECONDS = TrialBudget.seconds
_TRANSFORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Listener = Callable[[str], None]


@dataclass
class WorkloadForm:
    """The workload step's fields as typed (strings), parsed by `WizardController.apply_workload`.

    mode: "rate" (samples/s per GPU; empty = unknown) or "step" (step time in s and batch size).
    """

    mode: str = "rate"
    samples_per_s: str = ""
    step_time_s: str = ""
    batch_size: str = "32"
    epochs: str = "1"
    nodes: str = "1"
    gpus_per_node: str = "1"
    transform: str = ""
    data_location: str = ""  # "" = infer from the URI; else one of workload.DATA_LOCATIONS


class WizardController:
    """State and actions of the six-step wizard around one `AdvisorSession`."""

    def __init__(
        self,
        session: AdvisorSession | None = None,
        uri: str = "",
        endpoint_url: str = "",
        aws_profile: str = "",
    ) -> None:
        if session is None:
            from advisor.session import AdvisorSession

            session = AdvisorSession()
        self.session = session
        self.step = 0
        # step 1
        self.uri, self.endpoint_url, self.aws_profile = uri, endpoint_url, aws_profile
        self.demo_layout = "small-images"
        # step 2: None = plan for this machine as probed
        self.target_gpu: str | None = None
        self.gpu_count = 1
        # step 3
        self.workload_form = WorkloadForm()
        self.field_errors: dict[str, str] = {}
        self.parsed_workload: Workload | None = None  # the form as last parsed, if valid
        # step 4
        self.trial_seconds = DEFAULT_TRIAL_SECONDS
        self.trial_points: list[LoaderPoint] = []
        # step 5/6
        self.export_bundle: ExportBundle | None = None
        self.saved_paths: tuple[Path, ...] = ()
        # status
        self.errors: dict[str, str] = {}
        self.job: str | None = None
        self.progress = 0.0
        self.message = ""
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._future: Future[None] | None = None
        self._cancel = threading.Event()

    # --- observation ---------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        """Call `listener(topic)` on every change; topics: step, status, error, profile,
        hardware, workload, trial_point, trial, recommendation, export, saved."""
        self._listeners.append(listener)

    def _notify(self, topic: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(topic)
            except Exception as exc:  # a broken view must not break the engine's work
                self.errors.setdefault(self.step_name, f"display error: {describe(exc)}")

    def _status(self, message: str, progress: float | None = None) -> None:
        self.message = message
        if progress is not None:
            self.progress = max(0.0, min(1.0, progress))
        self._notify("status")

    def _set_error(self, step: str, message: str | None) -> None:
        if message is None:
            self.errors.pop(step, None)
        else:
            self.errors[step] = message
        self._notify("error")

    # --- results, read from the session -------------------------------------------------------
    @property
    def step_name(self) -> str:
        return STEPS[self.step]

    @property
    def profile(self) -> DatasetProfile | None:
        return self.session.profile

    @property
    def hardware(self) -> HardwareProfile | None:
        return self.session.hardware

    @property
    def trial(self) -> TrialResult | None:
        return self.session.trial

    @property
    def recommendation(self) -> Recommendation | None:
        return self.session.recommendation

    @property
    def busy(self) -> bool:
        return self.job is not None

    # --- background work ----------------------------------------------------------------------
    def _start(self, job: str, step: str, work: Callable[[threading.Event], None]) -> bool:
        """Run `work(cancel)` in the worker thread; False (and an inline note) if one is running."""
        with self._lock:
            if self.job is not None:
                self._set_error(step, f"please wait: {self.job} is still running (or cancel it)")
                return False
            self.job = job
            self._cancel = threading.Event()
            cancel = self._cancel
            future: Future[None] = Future()
            self._future = future
        self._set_error(step, None)
        self._status(f"{job} ...", 0.0)

        def run() -> None:
            future.set_running_or_notify_cancel()
            try:
                work(cancel)
            except BaseException as exc:  # nothing may escape a worker thread into the kernel
                self._set_error(step, describe(exc))
                self._status(f"{job} failed", 0.0)
            finally:
                self.job = None
                self._notify("status")
                future.set_result(None)

        self._thread = threading.Thread(target=run, name=f"{THREAD_PREFIX}-{job}", daemon=True)
        self._thread.start()
        return True

    def cancel(self) -> None:
        """Ask the running work to stop; the engine returns what it has so far."""
        if self.job is not None:
            self._cancel.set()
            self._status(f"cancelling {self.job} ...")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background work (if any) is done and its thread has ended."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    @property
    def future(self) -> Future[None] | None:
        """The running (or last) background job; its result is None, errors are in `errors`."""
        return self._future

    # --- step 1: dataset ----------------------------------------------------------------------
    def _apply_location(self) -> None:
        """Point the session at the typed location unless it already is (keeps demo credentials)."""
        location = self.session.location
        if (
            location is not None
            and location.uri == self.uri.strip()
            and (location.endpoint_url or "") == self.endpoint_url.strip()
            and (location.profile or "") == self.aws_profile.strip()
        ):
            return
        self.session.set_location(
            self.uri.strip(),
            endpoint_url=self.endpoint_url.strip() or None,
            profile=self.aws_profile.strip() or None,
        )
        self._invalidate_after_profile()

    def _invalidate_after_profile(self) -> None:
        self.trial_points = []
        self.export_bundle = None
        self.saved_paths = ()
        self._notify("profile")

    def run_profile(self) -> bool:
        """Profile the typed location in the background; False if it cannot start."""
        try:
            self._apply_location()
        except Exception as exc:
            self._set_error("dataset", describe(exc))
            return False

        def work(cancel: threading.Event) -> None:
            self._profile(cancel)

        return self._start("profile", "dataset", work)

    def _profile(self, cancel: threading.Event) -> None:
        self.session.run_profile(progress=self._status, cancel=cancel)
        self._invalidate_after_profile()
        note = " (cancelled: partial listing)" if cancel.is_set() else ""
        self._status(f"profile done{note}", 1.0)

    def use_demo(self, layout: str | None = None, profile: bool = True) -> bool:
        """Start (or find) the demo endpoint, fill in the dataset fields, then profile it."""
        layout = layout or self.demo_layout
        self.demo_layout = layout

        def work(cancel: threading.Event) -> None:
            self._status("starting the demo endpoint (first time: generating data) ...", 0.0)
            uri = self.session.use_demo(layout, progress=self._status)
            location = self.session.location
            self.uri = uri
            self.endpoint_url = (location.endpoint_url or "") if location else ""
            self.aws_profile = ""
            self._invalidate_after_profile()
            self._notify("dataset")
            if profile and not cancel.is_set():
                self._profile(cancel)
            else:
                self._status("demo dataset ready", 1.0)

        return self._start("demo", "dataset", work)

    # --- step 2: hardware ---------------------------------------------------------------------
    def run_hardware(self, target_gpu: str | None = None, gpu_count: int | None = None) -> bool:
        """Probe this machine (quick), optionally planning for catalogued GPUs; False on error."""
        if target_gpu is not None:
            self.target_gpu = target_gpu or None
        if gpu_count is not None:
            self.gpu_count = gpu_count
        try:
            hardware = self.session.run_hardware(self.target_gpu, self.gpu_count)
        except Exception as exc:
            self._set_error("hardware", describe(exc))
            return False
        self._set_error("hardware", None)
        self.export_bundle = None
        if hardware.gpu_count and self.workload_form.gpus_per_node == "1":
            most = int(range_of(Workload, "gpus_per_node").high)
            self.workload_form.gpus_per_node = str(min(hardware.gpu_count, most))
        self._notify("hardware")
        return True

    # --- step 3: workload ---------------------------------------------------------------------
    def parse_workload(self) -> Workload | None:
        """The typed workload, or None with `field_errors` saying what is wrong, field by field."""
        self.parsed_workload = self._parse_workload()
        return self.parsed_workload

    def _parse_workload(self) -> Workload | None:
        form, errors = self.workload_form, {}

        def number(name: str, text: str, bound: Range, label: str) -> Any:
            try:
                return bound.parse(text, label)
            except ValueError as exc:
                errors[name] = str(exc)
                return None

        def field(name: str, text: str, label: str) -> Any:
            return number(name, text, range_of(Workload, name), label)

        batch = field("batch_size", form.batch_size, "batch size")
        epochs = field("epochs", form.epochs, "epochs")
        nodes = field("nodes", form.nodes, "nodes")
        gpus = field("gpus_per_node", form.gpus_per_node, "GPUs per node")
        rate: float | None = None
        step_time: float | None = None
        if form.mode == "step":
            step_time = number("step_time_s", form.step_time_s, STEP_TIME_S, "step time")
        elif form.samples_per_s.strip():
            rate = number(
                "samples_per_s",
                form.samples_per_s,
                range_of(Workload, "consumer_rate"),
                "samples/s per GPU",
            )
        transform = form.transform.strip() or None
        if transform is not None and not _TRANSFORM.match(transform):
            errors["transform"] = f"transform: {transform!r} is not of the form module:callable"
        self.field_errors = errors
        if errors:
            return None
        try:
            common = {
                "epochs": epochs,
                "nodes": nodes,
                "gpus_per_node": gpus,
                "data_location": form.data_location or None,
            }
            if step_time is not None:
                return Workload.from_step_time(step_time, batch, transform=transform, **common)
            return Workload(consumer_rate=rate, batch_size=batch, transform=transform, **common)
        except ValueError as exc:
            self.field_errors = {"workload": describe(exc)}
            return None

    def apply_workload(self) -> bool:
        """Parse the form into the session's workload; False (and inline errors) if invalid."""
        workload = self.parse_workload()
        if workload is None:
            self._set_error("workload", "; ".join(self.field_errors.values()))
            self._notify("workload")
            return False
        if workload != self.session.workload:
            self.session.set_workload(workload)
            self.export_bundle = None
        self._set_error("workload", None)
        self._notify("workload")
        return True

    # --- step 4: live trial -------------------------------------------------------------------
    def run_trial(self, seconds: float | None = None) -> bool:
        """Run the live loader trial in the background; points stream in via `trial_point`."""
        if seconds is not None:
            self.trial_seconds = seconds
        try:
            TrialBudget(self.trial_seconds)
        except ValueError as exc:
            self._set_error("trial", describe(exc))
            return False
        self.trial_points = []
        self._notify("trial_point")
        budget = self.trial_seconds

        def work(cancel: threading.Event) -> None:
            result = self.session.run_trial(seconds=budget, progress=self._on_trial, cancel=cancel)
            self.trial_points = list(result.sweep) or self.trial_points
            self.export_bundle = None
            done = "cancelled" if result.cancelled else "done"
            self._status(f"trial {done} in {result.seconds_used:.1f} s", 1.0)
            self._notify("trial")

        return self._start("trial", "trial", work)

    def _on_trial(self, event: TrialEvent) -> None:
        if event.point is not None:
            self.trial_points = [*self.trial_points, event.point]
            self._notify("trial_point")
        self._status(event.message, event.fraction)

    # --- step 5: recommendation ---------------------------------------------------------------
    def run_recommend(self) -> bool:
        """Ask the engine for its recommendation (quick, rule evaluation); False on error."""
        try:
            self.session.run_recommend()
        except Exception as exc:
            self._set_error("recommendation", describe(exc))
            return False
        self._set_error("recommendation", None)
        self.export_bundle = None
        self._notify("recommendation")
        return True

    # --- step 6: export -----------------------------------------------------------------------
    def build_export(self) -> bool:
        try:
            self.export_bundle = self.session.export()
        except Exception as exc:
            self._set_error("export", describe(exc))
            return False
        self._set_error("export", None)
        self._notify("export")
        return True

    def save(
        self, directory: str | os.PathLike[str] = ".", stem: str = "dataloader_config"
    ) -> bool:
        """Write `<stem>.py` and `<stem>.json` into `directory` (relative to the notebook)."""
        stem = stem.strip()
        if not stem or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", stem):
            self._set_error("export", f"invalid input: {stem!r} is not a Python module name")
            return False
        try:
            if self.export_bundle is None:
                self.export_bundle = self.session.export()
            target = Path(directory).expanduser().resolve()
            target.mkdir(parents=True, exist_ok=True)
            self.saved_paths = tuple(self.export_bundle.save(target, stem))
        except Exception as exc:
            self._set_error("export", describe(exc))
            return False
        self._set_error("export", None)
        self._notify("saved")
        return True

    def download_uri(self, kind: str = "module") -> str | None:
        """A data: URI of the generated module ("module") or JSON ("json") for a download link."""
        if self.export_bundle is None:
            return None
        if kind == "module":
            text, mime = self.export_bundle.module_source, "text/x-python"
        else:
            text, mime = self.export_bundle.json_text, "application/json"
        return f"data:{mime};base64,{base64.b64encode(text.encode()).decode()}"

    # --- navigation ---------------------------------------------------------------------------
    def next_blocker(self) -> str | None:
        """Why Next is not possible now (a plain sentence), or None."""
        if self.busy:
            return f"{self.job} is still running"
        name = self.step_name
        if name == "dataset" and self.profile is None:
            return "profile a data set (or use the demo) first"
        if name == "hardware" and self.hardware is None:
            return "the hardware probe has not run"
        if name == "recommendation" and self.recommendation is None:
            return "there is no recommendation yet"
        if name == "export":
            return "this is the last step"
        return None

    def next(self) -> bool:
        """Leave the current step (committing its input) and enter the next one."""
        blocker = self.next_blocker()
        if blocker is not None:
            self._set_error(self.step_name, blocker)
            return False
        if self.step_name == "workload" and not self.apply_workload():
            return False
        self._set_error(self.step_name, None)
        self.go(self.step + 1)
        return True

    def back(self) -> bool:
        if self.busy or self.step == 0:
            return False
        self.go(self.step - 1)
        return True

    def go(self, step: int) -> None:
        """Show `step` (0-based), running what it needs on entry."""
        self.step = max(0, min(len(STEPS) - 1, step))
        self._notify("step")
        name = self.step_name
        if name == "hardware" and self.hardware is None:
            self.run_hardware()
        elif name == "workload":
            self.parse_workload()
            self._notify("workload")
        elif name == "recommendation" and self.recommendation is None:
            self.run_recommend()
        elif name == "export" and self.export_bundle is None:
            self.build_export()

    def close(self) -> None:
        """Cancel running work and wait briefly for the worker thread to end."""
        self.cancel()
        self.wait(10)

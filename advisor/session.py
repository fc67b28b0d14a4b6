"""The advisor's state across its steps: the one object the CLI and the wizard drive.

Each step stores its result on the session; a later step uses what earlier ones found. Errors
are raised as Python built-ins (see `advisor.core.errors.describe` for the one-line message).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from advisor.core.bounds import ListingLimits, TrialBudget
from advisor.core.location import DatasetLocation, check_answers
from advisor.core.workload import Workload
from advisor.decide.history import ComparisonRecord, History, TrialRecord, amend, keep
from advisor.decide.words import stale_trial_note
from advisor.measure.profile import DEFAULT_MAX_KEYS, DatasetProfile
from advisor.measure.profile import Progress as ProfileProgress
from advisor.measure.trial.results import TrialResult, TrialSetup
from native_loader import Credentials, S3Reader

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation
    from advisor.diagnosis.loop import Comparison
    from advisor.export import ExportBundle
    from advisor.measure.hardware import HardwareProfile
    from advisor.measure.hardware.target import TargetMachine
    from advisor.measure.trial.data import TrialProgress
    from native_loader.local_copy import CopyReport


Rec = TypeVar("Rec", TrialRecord, ComparisonRecord)
DEMO_PROGRESS_S = 0.25  # the demo's upload reports its progress at most this often


@dataclass
class AdvisorSession:
    """Location, credentials (never exported) and the results of each step so far."""

    location: DatasetLocation | None = None
    credentials: Credentials | None = field(default=None, repr=False)
    workload: Workload = field(default_factory=Workload)
    profile: DatasetProfile | None = None
    # the machine the advice plans for: this one, or the target (`run_hardware(target=...)`)
    hardware: HardwareProfile | None = None
    # this machine, where the trial runs (the same object as `hardware` without a target)
    machine: HardwareProfile | None = None
    trial: TrialResult | None = None
    recommendation: Recommendation | None = None
    demo_layout: str | None = None
    # why the last trial was dropped (its setup no longer matches); None: nothing dropped
    trial_dropped: str | None = None
    # the last sync of the set's local copy, as the exported module's prepare() ran it here:
    # the copy's figure in the advice from then on (None: no prepare() ran)
    local_copy: CopyReport | None = None
    # every finished trial and comparison of this session (`history()`), oldest first; each is
    # also kept in the run history across processes (`advisor.decide.history.store`)
    _trials: list[TrialRecord] = field(default_factory=list, init=False, repr=False)
    _comparisons: list[ComparisonRecord] = field(default_factory=list, init=False, repr=False)
    _stored: set[int] = field(default_factory=set, init=False, repr=False)  # runs kept there

    # --- step 1: dataset ---------------------------------------------------------------------
    def set_location(
        self,
        uri: str,
        endpoint_url: str | None = None,
        aws_profile: str | None = None,
        credentials: Credentials | None = None,
        anonymous: bool = False,
    ) -> DatasetLocation:
        """Point the session at a data set; later results are cleared. `aws_profile`: the AWS
        profile its credentials come from (not `self.profile`, the data set's profile);
        `anonymous`: a public bucket, read with unsigned requests (no credentials)."""
        location = DatasetLocation(
            uri, endpoint_url=endpoint_url or None, profile=aws_profile or None,
            anonymous=anonymous,
        )  # fmt: skip
        if self.demo_layout is not None:  # leaving the demo: the kernel's AWS variables too
            from advisor.demo import kernel_env

            kernel_env.restore()
        self.location, self.credentials, self.demo_layout = location, credentials, None
        self.profile = self.trial = self.recommendation = self.local_copy = None
        self.trial_dropped = None
        return location

    def use_demo(
        self, layout: str = "small-images", progress: ProfileProgress | None = None
    ) -> str:
        """Start (or find) the demo endpoint and point the session at one of its datasets.
        This process's AWS variables point at the demo too while the session uses it, so that
        the user's own loader in this kernel reads it (`advisor.demo.kernel_env`)."""
        from advisor.demo import LAYOUTS, DemoSpec, ensure_demo, kernel_env
        from advisor.demo.datasets import expected_bytes

        if layout not in LAYOUTS:
            raise ValueError(f"unknown demo layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
        report = None
        if progress is not None:
            weights = {layout: expected_bytes(DemoSpec())[layout]}
            fractions = dict.fromkeys(weights, 0.0)
            shown = [0.0, -1.0]  # when and at which fraction progress was last passed on

            def report(name: str, done: int, total: int) -> None:
                fractions[name] = min(1.0, done / max(total, 1))
                overall = sum(fractions[k] * w for k, w in weights.items()) / sum(weights.values())
                # The upload calls this per object, in its loop: a wizard redraws its status on
                # every call, which would pace the upload (thousands of redraws through the
                # notebook's comm channel), so at most one report per DEMO_PROGRESS_S or 1%.
                now = time.monotonic()
                if done < total and now - shown[0] < DEMO_PROGRESS_S and overall - shown[1] < 0.01:
                    return
                shown[:] = [now, overall]
                progress(f"preparing the demo data: {name} {done}/{total}", overall)

        demo = ensure_demo(progress=report, layouts=(layout,))  # only the layout asked for
        creds = demo.endpoint.credentials
        self.set_location(
            demo.uris[layout],
            endpoint_url=demo.endpoint.url,
            credentials=Credentials(creds.access_key, creds.secret_key),
        )
        self.demo_layout = layout
        kernel_env.point_at(demo.endpoint)
        return demo.uris[layout]

    def check_location(self) -> None:
        """Before any listing: an endpoint that is not there or never answers is said so first,
        then missing credentials (`advisor.core.location.check_answers`)."""
        check_answers(self._need_location(), self.credentials)

    def reader(self) -> S3Reader:
        location = self._need_location()
        return S3Reader(location.reader_config(), credentials=self.credentials)

    def run_profile(
        self,
        progress: ProfileProgress | None = None,
        cancel: threading.Event | None = None,
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> DatasetProfile:
        from advisor.measure.profile import profile_dataset

        ListingLimits(max_keys)  # a bad value is refused before any listing
        location = self._need_location()
        with self.reader() as reader:
            self.profile = profile_dataset(
                location, reader, max_keys=max_keys, progress=progress, cancel=cancel
            )
        self.trial = self.recommendation = None
        return self.profile

    # --- step 2: hardware --------------------------------------------------------------------
    def run_hardware(
        self,
        target_gpu: str | None = None,
        gpu_count: int = 1,
        nvml: object = None,
        target: TargetMachine | None = None,
    ) -> HardwareProfile:
        """Probe this machine; with `target`, plan for that machine (its cores, memory, disk,
        network and GPUs: `advisor.measure.hardware.target`), the trial still measuring here;
        with `target_gpu` alone, plan for that GPU on this machine (hardware.GPU_CATALOG).

        `nvml`: an NVML module to probe through (a recorder, say); None imports pynvml.
        """
        from advisor.measure.hardware import probe_hardware

        machine = probe_hardware(nvml=nvml)
        hardware = machine
        if target is not None:
            hardware = machine.planned_for(target, self.workload.gpus_per_node)
        elif target_gpu:
            hardware = machine.with_target_gpu(target_gpu, gpu_count)
        self.machine, self.hardware = machine, hardware
        self.recommendation = None
        self._drop_stale_trial()
        return hardware

    # --- step 3: workload --------------------------------------------------------------------
    def set_workload(self, workload: Workload) -> Workload:
        """The job to advise for; a trial measured under another setup is dropped (and
        `trial_dropped` says why): its sweep ran with the old batch size, consumer or transform."""
        self.workload = workload
        target = self.hardware.target if self.hardware is not None else None
        if target is not None and self.machine is not None:  # the node's GPUs are its ranks
            self.hardware = self.machine.planned_for(target, workload.gpus_per_node)
        self.recommendation = None
        self._drop_stale_trial()
        return workload

    def _drop_stale_trial(self) -> None:
        """Drop the trial when the workload's or the machine's setup no longer matches the one
        it measured under; `trial_dropped` says what changed."""
        setup = self.trial.setup if self.trial is not None else None
        if setup is None or self.hardware is None:
            return
        now = TrialSetup.of(self.workload, self.hardware.trial_cores, setup.read_path)
        changes = setup.differences(now, machine=self.hardware.target is None)
        if changes:
            self.trial = None
            self.trial_dropped = stale_trial_note(changes, "were dropped")

    # --- step 4: live trial ------------------------------------------------------------------
    def run_trial(
        self,
        seconds: float = TrialBudget.seconds,
        progress: TrialProgress | None = None,
        cancel: threading.Event | None = None,
    ) -> TrialResult:
        from advisor.decide.recommend import read_paths
        from advisor.measure.trial.run import run_trial

        TrialBudget(seconds)  # a bad budget is refused before profiling starts
        location = self._need_location()
        profile = self.profile or self.run_profile()
        planned = self.hardware or self.run_hardware()
        machine = self.machine or planned
        # what training reads on the machine planned for; measured on this one, as one rank:
        # with a target, the per-sample costs are what the model carries there
        paths = read_paths(profile, planned, self.workload, data_fs=self._data_fs(profile))
        workload = self.workload
        if planned.target is not None:
            workload = dataclasses.replace(workload, nodes=1, gpus_per_node=1)
        self.trial_dropped = None
        self.trial = run_trial(
            location,
            profile,
            machine,
            workload,
            credentials=self.credentials,
            seconds=seconds,
            progress=progress,
            cancel=cancel,
            read_paths=paths,
        )
        self.recommendation = None
        record = TrialRecord.of(self._next_run(), self.trial, self.workload.consumer_rate)
        self._trials.append(self._kept(record))
        return self.trial

    # --- step 5: recommendation --------------------------------------------------------------
    def run_recommend(self) -> Recommendation:
        from advisor.decide.recommend import recommend

        profile = self.profile or self.run_profile()
        hardware = self.hardware or self.run_hardware()
        recommendation = recommend(
            profile, hardware, self.workload, self.trial, data_fs=self._data_fs(profile),
            local_copy=self.local_copy,
        )  # fmt: skip
        if self.trial_dropped is not None:
            notes = (*recommendation.notes, self.trial_dropped)
            recommendation = dataclasses.replace(recommendation, notes=notes)
        self.recommendation = recommendation
        self._answer_trial(recommendation)
        return recommendation

    def record_local_copy(self, report: CopyReport | None) -> Recommendation | None:
        """Keep the set's local copy as its prepare() ran here (a sync that fetched nothing
        measured nothing) and make the recommendation again with it: the copy then has that
        one figure in every front, the advice's cards included (`Context.copy_rate`)."""
        if report is None or report.bytes_per_s <= 0:
            return self.recommendation
        self.local_copy = report
        return self.run_recommend() if self.recommendation is not None else None

    # --- the runs so far ---------------------------------------------------------------------
    def history(self) -> History:
        """Every trial (with its recommendation's key facts) and comparison of this session,
        oldest first, numbered as the run history numbers them (`RunStore().load()` gives
        every process's); `advisor.report.history.history_table` puts them side by side and
        says whether a repeated trial's answer held."""
        return History(tuple(self._trials), tuple(self._comparisons))

    def record_comparison(
        self, comparison: Comparison, changed: tuple[str, ...] = ()
    ) -> ComparisonRecord:
        """Keep a before/after comparison of the user's loader and the recommended one (run on
        this session's data and workload) in the history; `changed`: what the advice changed."""
        dataset = self.location.uri if self.location is not None else "-"
        record = ComparisonRecord.of(
            self._next_run(), comparison, dataset, self.workload.consumer_rate, changed
        )
        record = self._kept(record)
        self._comparisons.append(record)
        return record

    def _next_run(self) -> int:
        """The session's own count: a run's number where the run history could not keep it."""
        return len(self._trials) + len(self._comparisons) + 1

    def _kept(self, record: Rec) -> Rec:
        """`record` kept in the run history and numbered there (best effort: as it was, with
        a warning, where the history cannot be written)."""
        stored = keep(record)
        if stored is None:
            return record
        self._stored.add(stored.number)
        return stored

    def _answer_trial(self, recommendation: Recommendation) -> None:
        """The trial's record gets the facts of the recommendation made from it (the latest)."""
        for index in range(len(self._trials) - 1, -1, -1):
            if self._trials[index].result is self.trial and self.trial is not None:
                answered = self._trials[index].answered(recommendation)
                self._trials[index] = answered
                if answered.number in self._stored:
                    amend(answered)
                return

    @staticmethod
    def _data_fs(profile: DatasetProfile) -> str | None:
        """A local path's file system (an NFS/EFS mount is read where it is): looked up here,
        so that recommend() reads nothing itself."""
        from advisor.measure.hardware import filesystem_type

        local = profile.storage == "local"
        return filesystem_type(profile.uri.removeprefix("file://")) if local else None

    # --- step 6: export ----------------------------------------------------------------------
    def export(self) -> ExportBundle:
        from advisor.demo.server import takes_dummy_keys
        from advisor.export import build_export

        recommendation = self.recommendation or self.run_recommend()
        return build_export(
            self._need_location(), recommendation, self.workload, self.profile,
            demo=self.demo_layout is not None,
            demo_dummy_keys=takes_dummy_keys(self.credentials),
        )  # fmt: skip

    def save_export(self, directory: Path, stem: str = "dataloader_config") -> tuple[Path, Path]:
        """Write `<stem>.py` and `<stem>.json` into `directory`; returns their paths."""
        return self.export().save(directory, stem)

    def _need_location(self) -> DatasetLocation:
        if self.location is None:
            raise ValueError("no data set chosen yet: give an s3:// URI or a local folder first")
        return self.location

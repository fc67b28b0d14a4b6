"""Where training reads, and whether the trial read it: the data's place (S3, a network or shared
file system), the read path of the job's steady state, and whether the trial's measurements hold
for it. `Context` (advisor/decide/facts/context.py) holds one as `ctx.reads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from advisor.core.location import NETWORK_FILESYSTEMS
from advisor.core.workload import Workload
from advisor.decide.keys import Key, State
from advisor.measure.hardware import HardwareProfile
from advisor.measure.profile import DatasetProfile
from advisor.measure.trial.results import (
    READ_LISTED,
    READ_LOCAL_COPY,
    READ_PACKED,
    TrialResult,
    TrialSetup,
)


@dataclass(frozen=True)
class TrainingReads:
    """Where the data is, what training reads of it, and whether the trial read the same."""

    profile: DatasetProfile
    hardware: HardwareProfile  # the trial's cores and the target, for `trial_setup_changes`
    workload: Workload
    trial: TrialResult | None
    data_fs: str | None  # file system type of a local data path ("nfs4", "ext4", ...)

    # --- where the data is --------------------------------------------------------------------

    @property
    def on_network_fs(self) -> bool:
        loc = self.workload.data_location
        return loc in ("efs", "nfs") or (
            self.profile.storage == "local"
            and (self.data_fs or "") in NETWORK_FILESYSTEMS
            and not self.on_fsx
        )

    @property
    def on_fsx(self) -> bool:
        loc = self.workload.data_location
        return loc == "fsx" or (self.profile.storage == "local" and self.data_fs == "lustre")

    @property
    def in_s3(self) -> bool:
        loc = self.workload.data_location
        if loc is not None:
            return loc == "s3"
        return self.profile.storage == "s3"

    # --- what training reads, and whether the trial read it ------------------------------------

    @property
    def packable(self) -> bool:
        """True when the trial can pack a sample as `advisor reshard` packs the set: one object
        is one sample (not text shards read as records, nor tars already)."""
        return self.profile.record_format is None and self.profile.dominant_format != "tar"

    def path(self, state: State) -> str | None:
        """What training reads in its steady state (every epoch, or every epoch after the first
        where a cache fills then): the listed objects (`READ_LISTED`), a local copy
        (`READ_LOCAL_COPY`: copy-local from S3, or a cache over several epochs), packed shards on
        local disk (`READ_PACKED`: after a reshard-first), or None where the trial makes no such
        thing (shards streamed from S3, packed text records or tars, a shared file system not
        mounted here)."""
        source = state.get(Key.DATA_SOURCE)
        if source == "reshard-first":
            local = state.get(Key.AFTER_RESHARD) == "copy-local" or self.profile.storage == "local"
            return READ_PACKED if self.packable and local and not self.on_network_fs else None
        if source == "copy-local":
            return READ_LISTED if self.profile.storage == "local" else READ_LOCAL_COPY
        if source == "shared-fs":
            return READ_LISTED if self.on_fsx else None
        if state.get(Key.CACHE_LOCALLY) and self.workload.epochs > 1:
            return READ_LOCAL_COPY
        return READ_LISTED  # stream / efs: the data stays where the trial read it

    @cached_property
    def trial_setup_changes(self) -> list[str]:
        """How the workload and machine now differ from the trial's setup (empty: the same, or
        a result that recorded none)."""
        setup = self.trial.setup if self.trial is not None else None
        if setup is None:
            return []
        now = TrialSetup.of(self.workload, self.hardware.trial_cores, setup.read_path)
        return setup.differences(now, machine=self.hardware.target is None)

    def as_trialled(self, state: State) -> bool:
        """True when training reads what the trial's sweep read (the same read path), under the
        setup the trial measured."""
        if self.trial is None or self.trial_setup_changes:
            return False
        trialled = self.trial.setup.read_path if self.trial.setup is not None else READ_LISTED
        return self.path(state) == trialled

    def packed_cpu_measured(self, state: State) -> bool:
        """True when training streams packed shards from where the trial cannot make them
        (S3, a network file system), and the trial swept a packed sample under this setup: the
        training thread's CPU per sample it measured (tar samples parsed, transformed, handed
        over) holds for them; the machine's does not (its readers read local files)."""
        if self.trial is None or self.trial.setup is None or self.trial_setup_changes:
            return False
        packed = self.trial.setup.read_path == READ_PACKED
        reshard = state.get(Key.DATA_SOURCE) == "reshard-first"
        return packed and reshard and self.path(state) is None

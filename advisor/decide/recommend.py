"""recommend(): run the decision rules and assemble a Recommendation (JSON-serializable).

The rules live in the package advisor/decide/rules/ and are documented, with the same ids, in
docs/decision-flow.md. This module runs their registry (first rule to set a value wins), groups
the findings into one decision per `DecisionKind` and adds the plain fields a user copies into a
DataLoader; every value comes from a rule's finding, and every rule is treated alike. It reads
nothing itself: the caller gives every fact (the session looks up a local path's file system).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.core.reader_budget import READER_BUDGET_BYTES, READER_INFLIGHT
from advisor.core.workload import Workload
from advisor.decide.bottleneck import Bottleneck, of_trial
from advisor.decide.rules import (
    RULES,
    Confidence,
    Context,
    DecisionKind,
    Finding,
    Key,
    evaluate,
)
from advisor.decide.words import stale_trial_note
from advisor.measure.hardware import HardwareProfile
from advisor.measure.profile import DatasetProfile
from advisor.measure.trial.results import READ_LISTED, READ_LOCAL_COPY, READ_PACKED
from native_loader.loader import LoaderSettings

if TYPE_CHECKING:
    from advisor.measure.trial.results import TrialResult
    from native_loader.local_copy import CopyReport

__all__ = [
    "DATA_SOURCES",
    "SAGEMAKER_INPUT_MODES",
    "Decision",
    "Recommendation",
    "recommend",
]

DATA_SOURCES = ("stream", "copy-local", "shared-fs", "efs", "reshard-first")
# SageMaker input mode per data source [SRC]; Pipe mode is mostly replaced by FastFile [SRC].
SAGEMAKER_INPUT_MODES = {
    "stream": "FastFile",
    "copy-local": "File",
    "shared-fs": "FSx for Lustre",
    "efs": "EFS",
}


# Decisions that act on S3 requests and object layout: nothing to do for a folder read in place.
S3_ONLY = frozenset({"requests_in_flight", "inflight_bytes", "shard_size", "prefix_layout"})
# Decisions about the objects' layout in the bucket: nothing to do once a local copy is read.
LAYOUT_ONLY = frozenset({"shard_size", "prefix_layout"})


@dataclass(frozen=True)
class Decision:
    """One decision: its value, why, which rules fired, the numbers used (units in the keys).

    `name` is a `DecisionKind`'s value (a plain string, as in the JSON).
    """

    name: str
    value: Any
    rationale: str
    rules: tuple[str, ...]
    evidence: dict[str, Any] = field(default_factory=dict)
    confidence: Confidence = "medium"
    measured: bool = False  # True: measured; False: a prediction or a profile-based choice

    @property
    def display(self) -> str:
        """The value for people, with its unit (`value` stays plain for JSON)."""
        kind = DecisionKind.named(self.name)
        # a name no DecisionKind has (a hand-made Decision): no unit known
        return str(self.value) if kind is None else kind.display(self.value)


@dataclass(frozen=True)
class Recommendation:
    """Where to read the data from and how to configure the DataLoader, with the reasons."""

    data_source: str
    cache_locally: bool
    after_reshard: str | None
    # how a SageMaker job gets this data; None where none applies (a folder already local)
    sagemaker_input_mode: str | None
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    shard_size_bytes: int
    prefix_count: int
    expected_samples_per_s: float
    # what training sees at num_workers as the model predicts it, its step holding its core (a
    # CUDA sync that spins: the slower); `predicted_blocking_...`, a step that leaves its core to
    # the loading (one that waits on an event, or sleeps)
    predicted_samples_per_s: float
    measured_samples_per_s: float | None
    consumer_rate: float | None
    input_bound: bool | None
    decisions: tuple[Decision, ...]
    fired_rules: tuple[str, ...]
    cost_notes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    data_format: str | None = None  # the set's dominant format (for the exported loader)
    # text shards read as records ("lines", "jsonl", "csv"; `DatasetProfile.record_format`): the
    # exported loader yields records; None: objects or tar samples
    records: str | None = None
    requests_in_flight: int = READER_INFLIGHT  # the native reader's, per loader process
    inflight_bytes: int = READER_BUDGET_BYTES  # the native reader's byte budget, per process
    # the model's prediction of what training sees at num_workers against the trial's measured
    # median there, (predicted - measured) / measured; None when nothing was measured there
    prediction_error: float | None = None
    # what limits the loader at num_workers, from the trial's measurements (None: not measured)
    bottleneck: Bottleneck | None = None
    predicted_blocking_samples_per_s: float | None = None

    def path(self) -> list[str]:
        """The rule ids on the path taken, in flow order (to highlight the Mermaid diagram)."""
        return list(self.fired_rules)

    def decision(self, name: str) -> Decision:
        for d in self.decisions:
            if d.name == name:
                return d
        raise KeyError(name)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """The torch.utils.data.DataLoader arguments this recommendation sets, as the runtime's
        factory (`native_loader.loader.LoaderSettings`) builds them: the trial's sweep and the
        exported module build their loaders there too."""
        settings = LoaderSettings(
            batch_size=1,  # the workload's; the recommendation sets none
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            prefetch_factor=self.prefetch_factor,
        )
        kwargs = settings.dataloader_kwargs(cuda_available=True)
        del kwargs["batch_size"]
        return kwargs

    @property
    def reads_folder_in_place(self) -> bool:
        """True for a folder already on this machine: read where it is, nothing copied."""
        return self.data_source == "copy-local" and self.sagemaker_input_mode is None

    def applies(self, decision: Decision) -> bool:
        """Whether `decision` acts on this data: nothing about S3 requests or object layout
        for a folder read in place; no shard size or key prefixes once a copy is read."""
        if self.reads_folder_in_place:
            return decision.name not in S3_ONLY
        if self.data_source == "copy-local":
            return decision.name not in LAYOUT_ONLY
        return True

    def shown_decisions(self) -> tuple[Decision, ...]:
        """The decisions that carry an action for this data (`applies`)."""
        return tuple(d for d in self.decisions if self.applies(d))

    def source_words(self) -> str:
        """The data source in plain words: "the folder, read in place", "copy-local (SageMaker
        File)", "stream"."""
        if self.reads_folder_in_place:
            return "the folder, read in place"
        source = self.data_source
        if source == "reshard-first":
            source += f", then {self.after_reshard}"
        if self.cache_locally:
            source += ", cache locally after the first epoch"
        if self.sagemaker_input_mode is not None:
            source += f" (SageMaker {self.sagemaker_input_mode})"
        return source

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Recommendation:
        fields = dict(data)
        fields["decisions"] = tuple(
            Decision(**{**d, "rules": tuple(d["rules"])}) for d in fields["decisions"]
        )
        for name in ("fired_rules", "cost_notes", "notes"):
            fields[name] = tuple(fields.get(name, ()))
        if fields.get("bottleneck") is not None:
            fields["bottleneck"] = Bottleneck.from_dict(fields["bottleneck"])
        return cls(**fields)


def _json_safe(value: Any) -> Any:
    """Evidence as JSON: no infinities or NaN, tuples as lists, plain keys."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def recommend(
    profile: DatasetProfile,
    hardware: HardwareProfile,
    workload: Workload,
    trial: TrialResult | None = None,
    *,
    data_fs: str | None = None,
    local_copy: CopyReport | None = None,
) -> Recommendation:
    """Decide data source and DataLoader settings for `workload` on `hardware`.

    data_fs: the file system type of a local data path ("nfs4", "ext4", ...; an NFS/EFS mount
        makes SRC-1 fire), as `advisor.measure.hardware.filesystem_type` finds it; None: not known.
    local_copy: the last sync of the set's local copy, as the exported module's prepare() ran
        it (`native_loader.local_copy.last_copy`): the copy's figure then (`Context.copy_rate`).
    """
    ctx = Context(profile, hardware, workload, trial, data_fs=data_fs, local_copy=local_copy)
    evaluation = evaluate(ctx)
    state = evaluation.state
    findings = [dataclasses.replace(f, evidence=_json_safe(f.evidence)) for f in evaluation.fired]
    by_rule = {rule.id: rule for rule in RULES}
    decided = {f.key: f for f in findings if f.key is not None}

    data_source = state.get(Key.DATA_SOURCE, "stream")
    after = state.get(Key.AFTER_RESHARD)
    training_source = ctx.training_source(state) or "stream"
    # SageMaker's input modes bring S3 data, or a file system, into the job: a folder already on
    # this machine's own disk has none, and copy-local there means reading it in place.
    on_a_file_system = training_source in ("efs", "shared-fs")
    mode = SAGEMAKER_INPUT_MODES[training_source] if ctx.reads.in_s3 or on_a_file_system else None
    num_workers = int(state[Key.NUM_WORKERS])
    expected = float(state[Key.EXPECTED_SAMPLES_PER_S])
    predicted = float(ctx.predicted_rate(state, num_workers))
    measured = ctx.measured_rates(state).get(num_workers)
    input_bound = state.get(Key.INPUT_BOUND, False if ctx.consumer_rate is not None else None)

    by_kind = {
        kind: [f for f in findings if by_rule[f.rule_id].decision is kind] for kind in DecisionKind
    }
    decisions = [d for kind, mine in by_kind.items() if (d := _decision(kind, mine)) is not None]
    if data_source == "reshard-first":
        first = decisions[0]
        extra = f" Then: {after}" + (f" (SageMaker {mode})." if mode else ".")
        decisions[0] = dataclasses.replace(first, rationale=first.rationale + extra)

    notes = list(hardware.notes if hardware.planned else ())
    if ctx.reads.trial_setup_changes:
        notes.append(stale_trial_note(ctx.reads.trial_setup_changes, "are not used"))
    notes += [f.rationale for f in evaluation.advisories if by_rule[f.rule_id].shown_in_notes]
    return Recommendation(
        data_source=data_source,
        cache_locally=bool(state.get(Key.CACHE_LOCALLY, False)),
        after_reshard=after,
        sagemaker_input_mode=mode,
        num_workers=num_workers,
        pin_memory=bool(state[Key.PIN_MEMORY]),
        prefetch_factor=state.get(Key.PREFETCH_FACTOR),
        shard_size_bytes=int(state[Key.SHARD_SIZE_BYTES]),
        prefix_count=int(state[Key.PREFIX_LAYOUT]),
        expected_samples_per_s=round(expected, 3),
        predicted_samples_per_s=round(predicted, 3),
        measured_samples_per_s=measured,
        consumer_rate=workload.consumer_rate,
        input_bound=input_bound,
        decisions=tuple(decisions),
        fired_rules=evaluation.path,
        cost_notes=tuple(f.rationale for f in by_kind[DecisionKind.COST]),
        notes=tuple(notes),
        data_format=profile.dominant_format,
        records=profile.record_format,
        requests_in_flight=int(state.get(Key.REQUESTS_IN_FLIGHT, READER_INFLIGHT)),
        inflight_bytes=int(state.get(Key.INFLIGHT_BYTES, READER_BUDGET_BYTES)),
        # NW-3 measured the chosen count and compared the model with it; NW-4 measured nothing
        prediction_error=decided[Key.NUM_WORKERS].evidence.get("prediction_error"),
        bottleneck=of_trial(ctx, state),
        predicted_blocking_samples_per_s=round(
            ctx.predicted_rate(state, num_workers, blocking=True), 3
        ),
    )


def _decision(kind: DecisionKind, mine: list[Finding]) -> Decision | None:
    """The decision `kind` from its rules' findings (`mine`, in flow order); None: none fired.
    The finding that set the decision's key leads: its value, confidence and measured."""
    if not mine:
        return None
    main = next((f for f in mine if f.key == kind.key), None) if kind.key else mine[0]
    value = [f.value for f in mine] if kind.collects else (main.value if main else None)
    evidence: dict[str, Any] = {}
    for f in mine:
        evidence.update(f.evidence)
    lead = main or mine[0]
    return Decision(
        name=kind.value,
        value=_json_safe(value),
        rationale=" ".join(f.rationale for f in mine),
        rules=tuple(f.rule_id for f in mine),
        evidence=evidence,
        confidence=lead.confidence,
        measured=lead.measured,
    )


def read_paths(
    profile: DatasetProfile,
    hardware: HardwareProfile,
    workload: Workload,
    *,
    data_fs: str | None = None,
) -> tuple[str, ...]:
    """What training will read, in epoch order, as the trial should measure it
    (`advisor.measure.trial.run.run_trial`'s `read_paths`): the data source rules decide it
    without a trial. A local copy from S3 reads local files every epoch; a cache over several
    epochs streams the first and reads local files after; a reshard-first set reads packed
    shards: the trial packs a sample (what training reads from local disk; for shards streamed
    from S3 its CPU costs feed the model); file systems the trial cannot make read as listed
    (the model then decides for them)."""
    ctx = Context(profile, hardware, workload, None, data_fs=data_fs)
    state = evaluate(ctx).state
    if state.get(Key.DATA_SOURCE) == "reshard-first":
        return (READ_PACKED,) if ctx.reads.packable else (READ_LISTED,)
    steady = ctx.reads.path(state)
    if steady != READ_LOCAL_COPY:
        return (READ_LISTED,)
    if state.get(Key.DATA_SOURCE) == "copy-local":
        return (READ_LOCAL_COPY,)
    return (READ_LISTED, READ_LOCAL_COPY)

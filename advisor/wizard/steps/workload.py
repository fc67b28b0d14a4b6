"""Step 3: how fast training consumes data, typed as strings and parsed field by field."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from advisor.core.bounds import Range, range_of
from advisor.core.errors import describe
from advisor.core.workload import STEP_TIME_S, Workload
from advisor.wizard.context import Topic, WizardContext
from advisor.wizard.steps.export import ExportStep

STEP = "workload"
_TRANSFORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass
class WorkloadForm:
    """The workload step's fields as typed (strings), parsed by `parse_form`.

    mode: "rate" (samples/s per GPU; empty = unknown) or "step" (step time in s and batch size).
    """

    mode: str = "rate"
    samples_per_s: str = ""
    step_time_s: str = ""
    batch_size: str = "32"
    epochs: str = "1"
    nodes: str = "1"
    gpus_per_node: str = "1"
    get_limit: str = ""  # optional: GET/s per prefix the storage serves (another endpoint's)
    transform: str = ""
    data_location: str = ""  # "" = infer from the URI; else one of workload.DATA_LOCATIONS
    loader: str = ""  # optional: the user's loader, a notebook variable or module:function
    loader_step: str = ""  # optional: the user's step (called with each batch), the same way


FORM_FIELDS = tuple(f.name for f in dataclasses.fields(WorkloadForm))


def parse_form(form: WorkloadForm) -> tuple[Workload | None, dict[str, str]]:
    """The typed workload, or None with what is wrong, field by field (the whole workload's
    inconsistency under "workload")."""
    errors: dict[str, str] = {}

    def number(name: str, text: str, bound: Range, label: str) -> float | None:
        try:
            value: float = bound.parse(text, label)
        except ValueError as exc:
            errors[name] = str(exc)
            return None
        return value

    def whole(name: str, text: str, label: str) -> int | None:
        value = number(name, text, range_of(Workload, name), label)
        return None if value is None else int(value)

    batch = whole("batch_size", form.batch_size, "batch size")
    epochs = whole("epochs", form.epochs, "epochs")
    nodes = whole("nodes", form.nodes, "nodes")
    gpus = whole("gpus_per_node", form.gpus_per_node, "GPUs per node")
    get_limit = (
        number("get_limit", form.get_limit, range_of(Workload, "get_limit"), "GET/s limit")
        if form.get_limit.strip()
        else None
    )
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
    for name, label in (("loader", "loader"), ("loader_step", "step")):
        spec = getattr(form, name).strip()
        if spec and not (spec.isidentifier() or _TRANSFORM.match(spec)):
            errors[name] = f"{label}: {spec!r} is neither a notebook variable nor module:function"
    if form.loader_step.strip() and not form.loader.strip():
        errors["loader_step"] = "step: give your loader too (the step runs with its batches)"
    if errors:
        return None, errors
    assert batch is not None and epochs is not None and nodes is not None and gpus is not None
    try:
        if step_time is not None:
            rate = Workload.from_step_time(step_time, batch).consumer_rate
        workload = Workload(
            consumer_rate=rate,
            batch_size=batch,
            epochs=epochs,
            nodes=nodes,
            gpus_per_node=gpus,
            get_limit=get_limit,
            transform=transform,
            data_location=form.data_location or None,
        )
    except ValueError as exc:
        return None, {"workload": describe(exc)}
    return workload, {}


class WorkloadStep:
    """The form, its live parse, and the workload the session plans with once applied."""

    def __init__(self, context: WizardContext, export: ExportStep) -> None:
        self.context = context
        self.export = export
        self.form = WorkloadForm()
        self.field_errors: dict[str, str] = {}
        self.parsed: Workload | None = None  # the form as last parsed, if valid

    @property
    def applied(self) -> Workload:
        """The workload the session plans with."""
        return self.context.session.workload

    def edit(self, field: str, value: str) -> None:
        """Set one form field as typed and parse the form again (live validation)."""
        if field not in FORM_FIELDS:
            raise KeyError(f"the workload form has no field {field!r}")
        setattr(self.form, field, value)
        self.parse()

    def parse(self) -> Workload | None:
        """The typed workload, or None with `field_errors` saying what is wrong, field by field.
        The user's loader and step are looked up as they are typed: a name that does not
        import (or no notebook variable by that name) is its field's error here, not the
        comparison's after the trial."""
        self.parsed, errors = parse_form(self.form)
        for name, label in (("loader", "loader"), ("loader_step", "step")):
            spec = getattr(self.form, name).strip()
            if spec and name not in errors:
                try:
                    _resolve(spec, label)
                except Exception as exc:  # the user's module may raise anything at import
                    errors[name] = describe(exc)
        if errors:
            self.parsed = None
        self.field_errors = errors
        return self.parsed

    def apply(self) -> bool:
        """Parse the form into the session's workload; False (and inline errors) if invalid."""
        workload = self.parse()
        if workload is None:
            self.context.set_error(
                STEP, "please correct the fields marked below"
            )  # said once, there
            self.context.notify(Topic.WORKLOAD)
            return False
        if workload != self.applied:
            had_trial = self.context.session.trial is not None
            self.context.session.set_workload(workload)
            self.export.forget_bundle()
            dropped = self.context.session.trial_dropped
            if had_trial and dropped is not None:  # its sweep ran under the old setup
                self.context.report(dropped)
                self.context.notify(Topic.TRIAL)
        self.context.set_error(STEP, None)
        self.context.notify(Topic.WORKLOAD)
        return True

    @property
    def demo_note(self) -> str | None:
        """One line for the loader fields while the demo is in use: the user's loader runs in
        this kernel, whose AWS variables then point at the demo (the values never shown)."""
        if self.context.session.demo_layout is None:
            return None
        from advisor.demo import kernel_env

        return kernel_env.NOTE if kernel_env.active() else None

    def user_objects(self) -> tuple[object, object | None] | None:
        """The user's loader and step (None: not given) as named in the form: a variable of the
        notebook, else module:function. None when no loader is named; ValueError when one
        cannot be found."""
        names = self.form.loader.strip(), self.form.loader_step.strip()
        if not names[0]:
            return None
        return _resolve(names[0], "loader"), (_resolve(names[1], "step") if names[1] else None)

    def plan_gpus(self, gpu_count: int) -> None:
        """Size the job to a machine with `gpu_count` GPUs unless the user chose otherwise."""
        if gpu_count and self.form.gpus_per_node == "1":
            most = int(range_of(Workload, "gpus_per_node").high)
            self.form.gpus_per_node = str(min(gpu_count, most))


def _resolve(spec: str, what: str) -> object:
    """A notebook variable named `spec`, or the callable "module:function" names."""
    if spec.isidentifier():
        from IPython import get_ipython

        shell = get_ipython()
        namespace = shell.user_ns if shell is not None else {}
        if spec not in namespace:
            raise ValueError(f"{what}: no variable named {spec!r} in this notebook")
        return namespace[spec]
    from advisor.cli.diagnose import load_object

    return load_object(spec, what)

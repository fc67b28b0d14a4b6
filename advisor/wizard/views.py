"""Thin ipywidgets views over `WizardController`: widgets in, controller calls out, traits back.

Every step container and main button carries a stable CSS class (`la-step-*`, `la-btn-*`) for
tests and styling; colours come from JupyterLab's CSS variables so light and dark themes work.
Controller callbacks may arrive from its worker thread: they only set widget traits.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from advisor.core.bounds import TrialBudget, range_of
from advisor.core.workload import Workload
from advisor.decide.recommend import Decision
from advisor.wizard import charts
from advisor.wizard.controller import STEP_TITLES, STEPS, WizardController
from advisor.wizard.flow import flow_bundle
from advisor.wizard.reshard_panel import ReshardPanel, ReshardStep

if TYPE_CHECKING:
    from advisor.measure.hardware import HardwareProfile
    from advisor.measure.profile import DatasetProfile

STYLE = """<style>
.la-wizard { color: var(--jp-ui-font-color1); font-family: var(--jp-ui-font-family);
  border: 1px solid var(--jp-border-color2); border-radius: 6px; padding: 8px 12px;
  background: var(--jp-layout-color0); max-width: 1000px; }
.la-wizard h3 { margin: 4px 0; color: var(--jp-ui-font-color0); }
.la-steps { display: flex; flex-wrap: wrap; gap: 4px; margin: 4px 0 8px 0; }
.la-steps span { padding: 2px 10px; border-radius: 12px; color: var(--jp-ui-font-color2);
  border: 1px solid var(--jp-border-color2); font-size: var(--jp-ui-font-size1); }
.la-steps span.la-done { color: var(--jp-ui-font-color1); }
.la-steps span.la-current { background: var(--jp-brand-color1);
  border-color: var(--jp-brand-color1); color: var(--jp-ui-inverse-font-color1);
  font-weight: bold; }
.la-steps span.la-taken { background: #f5a623; border-color: #b36b00; color: #1a1a1a; }
.la-gpus { display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 6px; }
.la-gpus .la-card { min-width: 220px; }
.la-error { color: var(--jp-error-color1); font-weight: bold; }
.la-hint { color: var(--jp-ui-font-color2); font-size: var(--jp-ui-font-size1); }
.la-table td, .la-table th { padding: 2px 10px 2px 0; text-align: left; vertical-align: top;
  color: var(--jp-ui-font-color1); }
.la-table th { color: var(--jp-ui-font-color2); font-weight: normal; }
.la-cards > div { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr));
  gap: 8px; }
.la-card { border: 1px solid var(--jp-border-color2); border-left: 4px solid var(--jp-brand-color1);
  border-radius: 4px; padding: 6px 12px; background: var(--jp-layout-color1);
  font-size: var(--jp-ui-font-size1); line-height: 1.4; }
.la-card .la-evidence { color: var(--jp-ui-font-color1); font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size); margin-top: 4px; overflow-wrap: anywhere; }
.la-card .la-card-title { font-weight: bold; }
.la-card .la-value { font-family: var(--jp-code-font-family); color: var(--jp-brand-color1); }
.la-card .la-meta { color: var(--jp-ui-font-color2); font-size: var(--jp-ui-font-size1); }
.la-pre { background: var(--jp-layout-color2); color: var(--jp-content-font-color1);
  font-family: var(--jp-code-font-family); font-size: var(--jp-code-font-size);
  max-height: 280px; overflow: auto; padding: 8px; margin: 4px 0; white-space: pre; }
.la-download a { color: var(--jp-content-link-color); margin-right: 16px; }
.la-wizard .js-plotly-plot .main-svg text { fill: var(--jp-ui-font-color1) !important; }
.la-wizard .js-plotly-plot .gridlayer path,
.la-wizard .js-plotly-plot .zerolinelayer path { stroke: var(--jp-border-color2) !important; }
.la-flow .jp-RenderedMermaid, .la-flow .jp-RenderedMarkdown { max-height: 640px; overflow: auto;
  border: 1px solid var(--jp-border-color2); border-radius: 4px; }
.la-wizard .js-plotly-plot .legend .bg { fill: transparent !important; }
</style>"""

_LABEL = {"description_width": "150px"}


def _button(text: str, css: str, style: str = "", tooltip: str = "") -> widgets.Button:
    button = widgets.Button(description=text, button_style=style, tooltip=tooltip or text)
    button.add_class(css)
    return button


def _text(label: str, css: str, placeholder: str = "", value: str = "") -> widgets.Text:
    field = widgets.Text(
        value=value,
        description=label,
        placeholder=placeholder,
        layout=widgets.Layout(width="520px"),  # one Layout per widget: they are mutated
        style=_LABEL,
    )
    field.add_class(css)
    return field


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='la-table'>{body}</table>"


def _set_outputs(output: widgets.Output, *entries: dict[str, Any]) -> None:
    """Replace an Output widget's content from any thread (no `with output:` capture)."""
    output.outputs = tuple(entries)


def profile_rows(profile: DatasetProfile) -> list[tuple[str, str]]:
    sizes = profile.sizes
    approx = "about " if profile.sampled else ""
    formats = ", ".join(
        f"{f.name} ({f.objects:,} objects"
        + (f", ~{f.samples_per_object:,.0f} samples each" if f.samples_per_object else "")
        + ")"
        for f in profile.formats
    )
    rows = [
        ("data set", profile.uri),
        ("objects", f"{approx}{profile.object_count:,} (listed {profile.listed_objects:,})"),
        ("total size", f"{approx}{charts.human_bytes(profile.total_bytes)}"),
        (
            "object size",
            f"median {charts.human_bytes(sizes.p50)}, p90 {charts.human_bytes(sizes.p90)}, "
            f"p99 {charts.human_bytes(sizes.p99)}, max {charts.human_bytes(sizes.max)}",
        ),
        ("formats", formats or "unknown"),
        ("samples (estimate)", f"{profile.samples_estimate:,}"),
        ("first-level prefixes", f"{profile.distinct_prefixes:,}"),
        ("listing took", f"{profile.list_seconds:.1f} s"),
    ]
    rows += [("note", note) for note in profile.notes]
    return rows


def gpu_cards(hardware: HardwareProfile) -> str:
    """One card per GPU (probed or planned), or a card saying none was found."""
    if not hardware.gpus:
        return (
            "<div class='la-card'><div class='la-card-title'>no GPU found on this machine</div>"
            "<div class='la-meta'>choose a target GPU below to plan for the training machine"
            "</div></div>"
        )
    cards = []
    for gpu in hardware.gpus:
        parts = []
        if gpu.memory_total_bytes is not None:
            parts.append(charts.human_bytes(gpu.memory_total_bytes))
        if gpu.pcie_gen_max is not None and gpu.pcie_width_max is not None:
            parts.append(f"PCIe gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}")
        if gpu.nvlink_active_links:
            parts.append(f"NVLink x{gpu.nvlink_active_links}")
        if gpu.driver_version:
            parts.append(f"driver {gpu.driver_version}")
        label = "planned" if hardware.planned else "GPU"
        cards.append(
            f"<div class='la-card la-gpu'><div class='la-card-title'>{label} {gpu.index}: "
            f"<span class='la-value'>{html.escape(gpu.name)}</span></div>"
            f"<div class='la-meta'>{html.escape(', '.join(parts))}</div></div>"
        )
    return f"<div class='la-gpus'>{''.join(cards)}</div>"


def hardware_rows(hardware: HardwareProfile) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    cores = f"{hardware.usable_cores} usable of {hardware.cpu_count} logical CPUs"
    if hardware.cgroup_cpu_limit is not None:
        cores += f" (cgroup limit {hardware.cgroup_cpu_limit:g})"
    rows.append(("CPU cores", cores))
    if hardware.ram_total_bytes is not None:
        free = hardware.ram_available_bytes
        ram = charts.human_bytes(hardware.ram_total_bytes)
        rows.append(("RAM", ram + (f" ({charts.human_bytes(free)} available)" if free else "")))
    if hardware.shm_bytes is not None:
        rows.append(("/dev/shm", charts.human_bytes(hardware.shm_bytes)))
    if hardware.disk is not None:
        disk = hardware.disk
        rows.append(
            (
                "scratch disk",
                f"{disk.path}: {disk.kind}, {charts.human_bytes(disk.free_bytes)} free"
                + (f", {disk.filesystem}" if disk.filesystem else ""),
            )
        )
    rows += [("note", note) for note in hardware.notes]
    return rows


def _text_of(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_text_of(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text_of(v) for v in value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _demand(workload: Any) -> str:
    """The typed workload in words: what one GPU and the whole job consume."""
    ranks = workload.nodes * workload.gpus_per_node
    if workload.consumer_rate is None:
        return f"rate unknown: the advisor aims for the loader's best throughput ({ranks} rank(s))"
    return (
        f"one GPU consumes {workload.consumer_rate:,.0f} samples/s; the job ({ranks} rank(s)) "
        f"{workload.consumer_rate * ranks:,.0f} samples/s"
    )


def decision_card(decision: Decision) -> str:
    """One recommendation decision as an HTML card: value, rationale, evidence, rules."""
    meta = ["measured" if decision.measured else "predicted", f"confidence {decision.confidence}"]
    if decision.rules:
        meta.append("rules " + ", ".join(decision.rules))
    evidence = {k: v for k, v in decision.evidence.items() if k != "sweep_table"}
    facts = "; ".join(f"{k} {_evidence_value(k, v)}" for k, v in evidence.items())
    table = decision.evidence.get("sweep_table")
    return (
        f"<div class='la-card'><div class='la-card-title'>{html.escape(decision.name)} = "
        f"<span class='la-value'>{html.escape(decision.display)}</span></div>"
        f"<div>{html.escape(decision.rationale)}</div>"
        + (sweep_table_html(table) if isinstance(table, dict) and table else "")
        + (f"<div class='la-evidence'>evidence: {html.escape(facts)}</div>" if facts else "")
        + f"<div class='la-meta'>{html.escape(' · '.join(meta))}</div></div>"
    )


def sweep_table_html(table: dict[str, Any]) -> str:
    """NW-3's measured table: per num_workers the median samples/s training saw, its spread
    (">=": no steady state, a lower bound) and the model's prediction."""
    rows = [
        "<tr><th>num_workers</th><th>measured median</th><th>spread</th><th>predicted</th></tr>"
    ]
    for workers, row in table.items():
        bound = "&ge; " if row.get("lower_bound") else ""
        rows.append(
            f"<tr><td>{html.escape(str(workers))}</td>"
            f"<td>{bound}{float(row['median']):,.1f}</td>"
            f"<td>{float(row['low']):,.1f}-{float(row['high']):,.1f}</td>"
            f"<td>{float(row['predicted']):,.1f}</td></tr>"
        )
    return f"<table class='la-table la-sweep'>{''.join(rows)}</table>"


def _evidence_value(key: str, value: object) -> str:
    if key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
        return charts.human_bytes(value)
    return _text_of(value)


def headline(rec: Any) -> str:
    """The recommendation in two lines: where to read from, and the DataLoader arguments."""
    kwargs = ", ".join(f"{k}={v!r}" for k, v in rec.dataloader_kwargs().items())
    source = f"read from: <b>{html.escape(str(rec.data_source))}</b>"
    if getattr(rec, "sagemaker_input_mode", None):
        source += f" (SageMaker input mode {html.escape(str(rec.sagemaker_input_mode))})"
    rows = [source, f"<code>DataLoader(dataset, {html.escape(kwargs)})</code>"]
    if any(d.name == "requests_in_flight" for d in rec.decisions):  # streaming (RD-1, RD-2)
        reader = f"max_inflight_requests={int(rec.requests_in_flight)}"
        if any(d.name == "inflight_bytes" for d in rec.decisions):
            reader += f", max_inflight_bytes={int(rec.inflight_bytes) >> 20} * 2**20"
        rows.append(f"<code>ReaderConfig({reader})</code> per worker")
    if rec.input_bound is True:
        rows.append("<span class='la-error'>the loader cannot keep up with the training</span>")
    elif rec.input_bound is False:
        rows.append("the loader keeps up with the training")
    rows += [html.escape(note) for note in (*rec.notes, *rec.cost_notes)]
    return "".join(f"<div>{row}</div>" for row in rows)


class Wizard(widgets.VBox):
    """The six-step wizard. `Wizard(controller)`; `wizard.controller` drives it headless."""

    def __init__(self, controller: WizardController | None = None) -> None:
        self.controller = controller or WizardController()
        c = self.controller
        # -- shared chrome
        self.title = widgets.HTML(STYLE + "<h3>Loader Advisor</h3>")
        self.steps_bar = widgets.HTML()
        self.steps_bar.add_class("la-steps-bar")
        self.error = widgets.HTML()
        self.error.add_class("la-error-box")
        self.progress = widgets.FloatProgress(
            value=0.0, min=0.0, max=1.0, layout={"width": "300px"}
        )
        self.progress.add_class("la-progress")
        self.status = widgets.HTML()
        self.status.add_class("la-status")
        self.cancel_button = _button("Cancel", "la-btn-cancel", "warning", "stop the running work")
        self.back_button = _button("Back", "la-btn-back", tooltip="previous step")
        self.next_button = _button("Next", "la-btn-next", "primary", "next step")
        self.status_row = widgets.HBox([self.progress, self.cancel_button, self.status])
        self.nav_row = widgets.HBox([self.back_button, self.next_button])
        self.body = widgets.VBox()
        # -- step 1: dataset
        self.uri = _text("Data set URI", "la-input-uri", "s3://bucket/prefix/ or /path", c.uri)
        self.endpoint = _text(
            "Endpoint URL", "la-input-endpoint", "optional: http://host:port", c.endpoint_url
        )
        self.aws_profile = _text("AWS profile", "la-input-profile", "optional", c.aws_profile)
        self.profile_button = _button("Profile", "la-btn-profile", "primary", "list and sniff")
        from advisor.demo.datasets import LAYOUTS

        self.demo_layout = widgets.Dropdown(
            options=list(LAYOUTS), value=c.demo_layout, description="Demo layout", style=_LABEL
        )
        self.demo_layout.add_class("la-input-demo-layout")
        self.demo_button = _button(
            "Use demo dataset", "la-btn-demo", tooltip="start the local demo endpoint, profile it"
        )
        self.profile_summary = widgets.HTML()
        self.profile_summary.add_class("la-profile-summary")
        self.size_chart = widgets.Output()
        self.size_chart.add_class("la-chart-sizes")
        dataset = widgets.VBox(
            [
                widgets.HTML("<b>1. Where is the training data?</b>"),
                self.uri,
                self.endpoint,
                self.aws_profile,
                widgets.HBox([self.profile_button]),
                widgets.HTML(
                    "<span class='la-hint'>No data set at hand? Try the local demo:</span>"
                ),
                widgets.HBox([self.demo_layout, self.demo_button]),
                self.profile_summary,
                self.size_chart,
            ]
        )
        # -- step 2: hardware
        from advisor.measure.hardware import GPU_CATALOG

        self.target_gpu = widgets.Dropdown(
            options=[("this machine as probed", ""), *((n, n) for n in GPU_CATALOG)],
            value=c.target_gpu or "",
            description="Plan for",
            style=_LABEL,
            layout=widgets.Layout(width="420px"),
        )
        self.target_gpu.add_class("la-input-target-gpu")
        per_node = range_of(Workload, "gpus_per_node")
        self.gpu_count = widgets.BoundedIntText(
            value=c.gpu_count,
            min=per_node.low,
            max=per_node.high,
            description="GPUs",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="120px"),
        )
        self.gpu_count.add_class("la-input-gpu-count")
        self.hardware_summary = widgets.HTML()
        self.hardware_summary.add_class("la-hardware-summary")
        hardware = widgets.VBox(
            [
                widgets.HTML("<b>2. What will it train on?</b>"),
                self.hardware_summary,
                widgets.HTML(
                    "<span class='la-hint'>Profiling on a different machine than training? "
                    "Plan for a catalogued GPU:</span>"
                ),
                widgets.HBox([self.target_gpu, self.gpu_count]),
            ]
        )
        # -- step 3: workload
        form = c.workload_form
        self.rate_mode = widgets.ToggleButtons(
            options=[("samples/s per GPU", "rate"), ("step time and batch size", "step")],
            value=form.mode,
            description="Consumption",
            style=_LABEL,
        )
        self.rate_mode.add_class("la-input-rate-mode")
        self.samples_per_s = _text(
            "Samples/s per GPU", "la-input-rate", "empty = unknown (aim for the best)"
        )
        self.step_time = _text("Step time (s)", "la-input-step-time", "seconds per batch")
        self.batch_size = _text("Batch size", "la-input-batch-size", value=form.batch_size)
        self.epochs = _text("Epochs", "la-input-epochs", value=form.epochs)
        self.nodes = _text("Nodes", "la-input-nodes", value=form.nodes)
        self.gpus_per_node = _text("GPUs per node", "la-input-gpus", value=form.gpus_per_node)
        self.transform = _text("Transform", "la-input-transform", "optional: module:callable")
        from advisor.core.workload import DATA_LOCATIONS

        self.data_location = widgets.Dropdown(
            options=[("infer from the URI", ""), *((d, d) for d in DATA_LOCATIONS)],
            value=form.data_location,
            description="Data already on",
            style=_LABEL,
        )
        self.data_location.add_class("la-input-data-location")
        self.workload_errors = widgets.HTML()
        self.workload_errors.add_class("la-field-errors")
        self.workload_fields: dict[str, widgets.Text] = {
            "samples_per_s": self.samples_per_s,
            "step_time_s": self.step_time,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "transform": self.transform,
        }
        workload = widgets.VBox(
            [
                widgets.HTML("<b>3. How fast does training consume data?</b>"),
                self.rate_mode,
                self.samples_per_s,
                self.step_time,
                self.batch_size,
                self.epochs,
                self.nodes,
                self.gpus_per_node,
                self.transform,
                self.data_location,
                self.workload_errors,
            ]
        )
        # -- step 4: trial
        budget = range_of(TrialBudget, "seconds")
        self.trial_seconds = widgets.BoundedFloatText(
            value=c.trial_seconds,
            min=budget.low,
            max=budget.high,
            description="Budget (s)",
            style=_LABEL,
        )
        self.trial_seconds.add_class("la-input-trial-seconds")
        self.run_trial_button = _button(
            "Run trial", "la-btn-run-trial", "primary", "measure DataLoader configurations"
        )
        self.trial_chart = widgets.Output()
        self.trial_chart.add_class("la-chart-trial")
        self.trial_summary = widgets.HTML()
        self.trial_summary.add_class("la-trial-summary")
        trial = widgets.VBox(
            [
                widgets.HTML(
                    "<b>4. Live trial</b> <span class='la-hint'>reads real objects and runs "
                    "DataLoader configurations for the time budget (optional: Next skips it)"
                    "</span>"
                ),
                widgets.HBox([self.trial_seconds, self.run_trial_button]),
                self.trial_chart,
                self.trial_summary,
            ]
        )
        # -- step 5: recommendation
        self.headline = widgets.HTML()
        self.headline.add_class("la-headline")
        self.cards = widgets.HTML()
        self.cards.add_class("la-cards")
        self.path_taken = widgets.HTML()
        self.path_taken.add_class("la-path")
        self.flow = widgets.Output()
        self.flow.add_class("la-flow")
        self.supply_chart = widgets.Output()
        self.supply_chart.add_class("la-chart-supply")
        self.reshard_panel = ReshardPanel(ReshardStep(c))
        recommendation = widgets.VBox(
            [
                widgets.HTML("<b>5. Recommendation</b>"),
                self.headline,
                self.supply_chart,
                self.reshard_panel.box,
                self.cards,
                widgets.HTML("<b>Decision flow</b> <span class='la-hint'>(path taken in orange)"),
                self.path_taken,
                self.flow,
            ]
        )
        # -- step 6: export
        self.module_preview = widgets.HTML()
        self.module_preview.add_class("la-preview-module")
        self.json_preview = widgets.HTML()
        self.json_preview.add_class("la-preview-json")
        self.save_dir = _text("Folder", "la-input-save-dir", "relative to the notebook", ".")
        self.save_stem = _text("Module name", "la-input-stem", value="dataloader_config")
        self.save_button = _button("Save", "la-btn-save", "success", "write .py and .json")
        self.saved = widgets.HTML()
        self.saved.add_class("la-saved")
        self.download = widgets.HTML()
        self.download.add_class("la-download")
        export = widgets.VBox(
            [
                widgets.HTML("<b>6. Export</b> <span class='la-hint'>generated module</span>"),
                self.module_preview,
                widgets.HTML("<span class='la-hint'>and the same as JSON</span>"),
                self.json_preview,
                self.save_dir,
                self.save_stem,
                widgets.HBox([self.save_button]),
                self.saved,
                self.download,
            ]
        )
        self.step_boxes = dict(
            zip(STEPS, (dataset, hardware, workload, trial, recommendation, export), strict=True)
        )
        for name, box in self.step_boxes.items():
            box.add_class(f"la-step-{name}")
        super().__init__(
            [self.title, self.steps_bar, self.body, self.error, self.status_row, self.nav_row]
        )
        self.add_class("la-wizard")
        self.trial_figure: Any = None  # the last plotly figures shown, for tests and users
        self.supply_figure: Any = None
        self._wire()
        c.subscribe(self.refresh)
        self.refresh("all")

    def close(self) -> None:
        """Cancel running work (its thread ends within seconds), then close the widgets."""
        self.controller.close()
        super().close()

    # --- widgets -> controller ----------------------------------------------------------------
    def _wire(self) -> None:
        c = self.controller

        def on_value(field: widgets.Widget, setter: Any) -> None:
            field.observe(lambda change: setter(change["new"]), names="value")

        on_value(self.uri, lambda v: setattr(c, "uri", v))
        on_value(self.endpoint, lambda v: setattr(c, "endpoint_url", v))
        on_value(self.aws_profile, lambda v: setattr(c, "aws_profile", v))
        on_value(self.demo_layout, lambda v: setattr(c, "demo_layout", v))
        on_value(self.trial_seconds, lambda v: setattr(c, "trial_seconds", float(v)))
        self.profile_button.on_click(lambda _: c.run_profile())
        self.demo_button.on_click(lambda _: c.use_demo(self.demo_layout.value))
        self.target_gpu.observe(
            lambda ch: c.run_hardware(ch["new"], self.gpu_count.value), names="value"
        )
        self.gpu_count.observe(
            lambda ch: c.run_hardware(self.target_gpu.value, ch["new"]) if c.target_gpu else None,
            names="value",
        )
        self.rate_mode.observe(lambda ch: self._workload_changed("mode", ch["new"]), names="value")
        self.data_location.observe(
            lambda ch: self._workload_changed("data_location", ch["new"]), names="value"
        )
        for name, field in self.workload_fields.items():
            field.observe(
                lambda ch, name=name: self._workload_changed(name, ch["new"]), names="value"
            )
        self.run_trial_button.on_click(lambda _: c.run_trial(float(self.trial_seconds.value)))
        self.cancel_button.on_click(lambda _: c.cancel())
        self.next_button.on_click(lambda _: c.next())
        self.back_button.on_click(lambda _: c.back())
        self.save_button.on_click(lambda _: c.save(self.save_dir.value, self.save_stem.value))

    def _workload_changed(self, name: str, value: str) -> None:
        setattr(self.controller.workload_form, name, value)
        self.controller.parse_workload()  # live, field-by-field validation
        self._show_workload()

    # --- controller -> widgets ----------------------------------------------------------------
    def refresh(self, topic: str) -> None:
        """Bring the widgets up to date after a controller change (`topic` says which)."""
        c = self.controller
        everything = topic == "all"
        if everything or topic == "step":
            self.body.children = (self.step_boxes[c.step_name],)
        if everything or topic in ("dataset", "profile"):
            self.uri.value, self.endpoint.value = c.uri, c.endpoint_url
            self.aws_profile.value = c.aws_profile
            self._show_profile()
        if everything or topic == "hardware":
            self._show_hardware()
        if everything or topic in ("workload", "hardware"):
            self._show_workload()
        if everything or topic in ("trial_point", "trial"):
            self._show_trial()
        if everything or topic == "recommendation":
            self._show_recommendation()
        if everything or topic in ("export", "saved"):
            self._show_export()
        self._show_chrome()

    def _show_chrome(self) -> None:
        c = self.controller
        marks = []
        for index, name in enumerate(STEPS):
            css = "la-current" if index == c.step else ("la-done" if index < c.step else "")
            marks.append(f"<span class='{css}'>{index + 1} {STEP_TITLES[name]}</span>")
        self.steps_bar.value = f"<div class='la-steps'>{''.join(marks)}</div>"
        message = c.errors.get(c.step_name)
        self.error.value = (
            f"<div class='la-error' role='alert'>{html.escape(message)}</div>" if message else ""
        )
        self.progress.value = c.progress
        self.status.value = f"<span class='la-hint'>{html.escape(c.message)}</span>"
        busy = c.busy
        self.cancel_button.disabled = not busy
        self.cancel_button.layout.visibility = "visible" if busy else "hidden"
        for button in (self.profile_button, self.demo_button, self.run_trial_button):
            button.disabled = busy
        self.back_button.disabled = busy or c.step == 0
        blocker = c.next_blocker()
        self.next_button.disabled = blocker is not None
        self.next_button.tooltip = blocker or "next step"

    def _show_profile(self) -> None:
        profile = self.controller.profile
        if profile is None:
            self.profile_summary.value = ""
            _set_outputs(self.size_chart)
            return
        self.profile_summary.value = _table(profile_rows(profile))
        _set_outputs(self.size_chart, charts.figure_bundle(charts.size_histogram(profile)))

    def _show_hardware(self) -> None:
        hardware = self.controller.hardware
        self.hardware_summary.value = (
            gpu_cards(hardware) + _table(hardware_rows(hardware)) if hardware else ""
        )

    def _show_workload(self) -> None:
        c = self.controller
        form = c.workload_form
        self.rate_mode.value = form.mode
        self.data_location.value = form.data_location
        for name, field in self.workload_fields.items():
            field.value = getattr(form, name)
        self.samples_per_s.layout.display = "none" if form.mode == "step" else ""
        self.step_time.layout.display = "" if form.mode == "step" else "none"
        self.workload_errors.value = "".join(
            f"<div class='la-error'>{html.escape(m)}</div>" for m in c.field_errors.values()
        )
        workload = c.parsed_workload
        if not c.field_errors and workload is not None:
            self.workload_errors.value = (
                f"<span class='la-hint'>{html.escape(_demand(workload))}</span>"
            )

    def _show_trial(self) -> None:
        c = self.controller
        rate = c.session.workload.consumer_rate
        self.trial_figure = charts.trial_chart(c.trial_points, rate)
        _set_outputs(self.trial_chart, charts.figure_bundle(self.trial_figure))
        trial = c.trial
        if trial is None:
            self.trial_summary.value = ""
            return
        rows = [("time used", f"{trial.seconds_used:.1f} of {trial.seconds_budget:.0f} s")]
        best = trial.best_count()
        if best is not None:
            bound = ">= " if best.lower_bound else ""
            rows.append(
                (
                    "best measured",
                    f"num_workers={best.num_workers}: {bound}{best.median:,.0f} samples/s median "
                    f"({best.low:,.0f}-{best.high:,.0f}) as training sees it",
                )
            )
        if trial.storage is not None:
            rows.append(
                (
                    "storage",
                    f"first byte p50 {trial.storage.first_byte_p50_s * 1000:.0f} ms, "
                    f"up to {trial.storage.best_mb_s:,.0f} MB/s",
                )
            )
        if trial.decode is not None:
            rows.append(
                (
                    "decode",
                    f"{trial.decode.cpu_s_per_sample * 1000:.2f} ms CPU per sample "
                    f"({trial.decode.transform})",
                )
            )
        if trial.cancelled:
            rows.append(("note", "cancelled: partial results"))
        rows += [("note", note) for note in trial.notes]
        self.trial_summary.value = _table(rows)

    def _show_recommendation(self) -> None:
        c = self.controller
        rec = c.recommendation
        if rec is None:
            self.cards.value = self.headline.value = self.path_taken.value = ""
            _set_outputs(self.flow)
            _set_outputs(self.supply_chart)
            return
        self.headline.value = headline(rec)
        self.cards.value = f"<div>{''.join(decision_card(d) for d in rec.decisions)}</div>"
        best = c.trial.best_count() if c.trial else None
        self.supply_figure = charts.throughput_chart(
            rec.expected_samples_per_s,
            c.session.workload.consumer_rate,
            best.median if best else None,
        )
        _set_outputs(self.supply_chart, charts.figure_bundle(self.supply_figure))
        self.path_taken.value = (
            "<div class='la-steps'>"
            + " → ".join(
                f"<span class='la-taken'>{html.escape(rule)}</span>" for rule in rec.path()
            )
            + "</div>"
        )
        _set_outputs(self.flow, flow_bundle(rec.path()))

    def _show_export(self) -> None:
        c = self.controller
        bundle = c.export_bundle
        if bundle is None:
            self.module_preview.value = self.json_preview.value = self.download.value = ""
        else:
            self.module_preview.value = (
                f"<pre class='la-pre'>{html.escape(bundle.module_source)}</pre>"
            )
            self.json_preview.value = f"<pre class='la-pre'>{html.escape(bundle.json_text)}</pre>"
            stem = html.escape(self.save_stem.value or "dataloader_config")
            self.download.value = (
                f"<a download='{stem}.py' href='{c.download_uri('module')}'>download {stem}.py</a>"
                f"<a download='{stem}.json' href='{c.download_uri('json')}'>"
                f"download {stem}.json</a>"
            )
        self.saved.value = (
            "saved: " + ", ".join(f"<code>{html.escape(str(p))}</code>" for p in c.saved_paths)
            if c.saved_paths
            else ""
        )

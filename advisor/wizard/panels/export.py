"""Step 6's view: the generated module and its JSON, Save, and download links."""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as widgets

from advisor.core.units import data_size
from advisor.wizard.context import Topic
from advisor.wizard.panels.base import StepPanel, button, html_area, text, words
from advisor.wizard.steps.export import ExportStep


def run_hint(module: Path, demo: bool) -> str:
    """How to run the saved module, in one line (for the demo's data: until when it reads)."""
    line = (
        f"Run it: python {module.name} (in its folder) reads 3 batches; in training: "
        f"from {module.stem} import make_dataloader."
    )
    if demo:
        line += (
            " The demo's endpoint ends with this kernel: then a copy-local module reads its "
            "complete local copy, and the module's docstring gives the demo's keys and how to "
            "serve it again."
        )
    return line


def what_next(stem: str, copy_local: bool) -> str:
    """The steps after this one, in a few lines: check the module, use it in training, prepare
    a copy-local's copy once per node, and when to ask again."""
    steps = [
        f"Save, then run <code>python {stem}.py</code> in its folder: it reads 3 batches and "
        "prints the loader's stats.",
        f"In training: <code>from {stem} import make_dataloader</code>, then "
        "<code>make_dataloader(rank=RANK, world_size=WORLD_SIZE)</code>.",
    ]
    if copy_local:
        steps.append(
            f"It copies the data to local disk first: <code>python {stem}.py --prepare</code> "
            "once per node before a multi-rank job (a single process does it on its first start)."
        )
    steps.append(
        "Ask again when the model, the batch size or the machine changes: the rate the training "
        "consumes decides the answer."
    )
    return (
        "<b>What next</b><ol class='la-what-next-steps'>"
        + "".join(f"<li>{line}</li>" for line in steps)
        + "</ol>"
    )


class ExportPanel(StepPanel):
    """Previews of what will be written, where to write it, and what was saved."""

    topics = frozenset({Topic.EXPORT, Topic.SAVED})

    def __init__(self, step: ExportStep) -> None:
        self.step = step
        self.module_preview = html_area("la-preview-module")
        self.json_preview = html_area("la-preview-json")
        self.save_dir = text("Folder", "la-input-save-dir", "relative to the notebook", ".")
        self.save_stem = text("Module name", "la-input-stem", value="dataloader_config")
        self.save_button = button("Save", "la-btn-save", "success", "write .py and .json")
        self.saved = html_area("la-saved")
        self.download = html_area("la-download")
        self.next_steps = html_area("la-what-next")
        # the home cache: the local copies exported loaders make, caches, the demo's data
        self.cache_list = html_area("la-cache-list")
        self.cache_pick = widgets.Dropdown(description="Remove", options=[], style={})
        self.cache_pick.add_class("la-input-cache-pick")
        self.cache_remove = button(
            "Remove", "la-btn-cache-remove", "warning", "remove it from the home cache"
        )
        self.box = widgets.VBox(
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
                self.next_steps,
                self.cache_list,
                widgets.HBox([self.cache_pick, self.cache_remove]),
            ]
        )
        self.save_button.on_click(lambda _: step.save(self.save_dir.value, self.save_stem.value))
        self.cache_remove.on_click(lambda _: self._remove_picked())

    def show(self) -> None:
        step = self.step
        demo = step.context.session.demo_layout is not None
        bundle = step.bundle
        stem = html.escape(self.save_stem.value or "dataloader_config")
        config = getattr(bundle, "config", None)
        self.next_steps.value = what_next(stem, bool(getattr(config, "local_copy_dir", None)))
        if bundle is None:
            self.module_preview.value = self.json_preview.value = self.download.value = ""
        else:
            self.module_preview.value = (
                f"<pre class='la-pre'>{html.escape(bundle.module_source)}</pre>"
            )
            self.json_preview.value = f"<pre class='la-pre'>{html.escape(bundle.json_text)}</pre>"
            self.download.value = (
                f"<a download='{stem}.py' href='{step.download_uri('module')}'>"
                f"download {stem}.py</a>"
                f"<a download='{stem}.json' href='{step.download_uri('json')}'>"
                f"download {stem}.json</a>"
            )
        self._show_cache()
        paths = ", ".join(f"<code>{html.escape(str(p))}</code>" for p in step.saved_paths)
        aged = step.out_of_date()
        if not step.saved_paths:
            self.saved.value = ""
        elif aged is not None:  # a newer recommendation: the file on disk is not this one
            self.saved.value = (
                f"<div class='la-error la-out-of-date'>out of date: {paths} was saved from an "
                f"earlier recommendation ({html.escape(aged)}): Save again to write this one."
                "</div>"
            )
        else:
            hint = html.escape(run_hint(step.saved_paths[0], demo))
            self.saved.value = f"saved: {paths}<div class='la-hint'>{hint}</div>"

    def _remove_picked(self) -> None:
        if self.cache_pick.value:
            self.step.remove_cached(self.cache_pick.value)

    def _show_cache(self) -> None:
        """The home cache, listed with sizes, and a pick of what to remove."""
        held = self.step.cache_entries()
        total = data_size(sum(e.bytes for e in held))
        rows = "".join(
            f"<tr><td><code>{html.escape(e.name)}</code></td><td>{data_size(e.bytes)}</td>"
            f"<td>{words(e.what)}</td></tr>"
            for e in held
        )
        self.cache_list.value = (
            f"<div class='la-hint'>The home cache (~/.cache/loader-advisor) holds {total}: "
            "copies a copy-local loader reads, caches of streamed epochs, the demo's data. "
            "Nothing removes them on their own (<code>python -m advisor cache</code> lists them "
            f"too).</div><table class='la-table la-cache'>{rows}</table>"
        )
        self.cache_pick.options = [e.name for e in held]
        self.cache_remove.disabled = not held

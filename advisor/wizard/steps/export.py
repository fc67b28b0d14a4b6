"""Step 6: the generated DataLoader module and its JSON, saved or offered for download."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.core.errors import describe
from advisor.wizard.context import Topic, WizardContext

if TYPE_CHECKING:
    from advisor.core.homecache import CacheEntry
    from advisor.export import ExportBundle

STEP = "export"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ExportStep:
    """The export bundle (built from the session on demand) and the paths last saved."""

    def __init__(self, context: WizardContext) -> None:
        self.context = context
        self.bundle: ExportBundle | None = None
        self.saved_paths: tuple[Path, ...] = ()
        self.saved_json: str | None = None  # the settings as last saved, to tell when they age

    def forget_bundle(self) -> None:
        """An earlier step changed: the bundle is built again when it is next needed."""
        self.bundle = None

    def forget_all(self) -> None:
        """A new data set: neither the bundle nor what was saved from it applies."""
        self.bundle = None
        self.saved_paths, self.saved_json = (), None

    def build(self) -> bool:
        try:
            self.bundle = self.context.session.export()
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.context.set_error(STEP, None)
        self.context.notify(Topic.EXPORT)
        return True

    def save(
        self, directory: str | os.PathLike[str] = ".", stem: str = "dataloader_config"
    ) -> bool:
        """Write `<stem>.py` and `<stem>.json` into `directory` (relative to the notebook)."""
        stem = stem.strip()
        if not stem or not _MODULE_NAME.fullmatch(stem):
            self.context.set_error(STEP, f"invalid input: {stem!r} is not a Python module name")
            return False
        try:
            if self.bundle is None:
                self.bundle = self.context.session.export()
            target = Path(directory).expanduser().resolve()
            target.mkdir(parents=True, exist_ok=True)
            self.saved_paths = tuple(self.bundle.save(target, stem))
            self.saved_json = self.bundle.json_text
        except Exception as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.context.set_error(STEP, None)
        self.context.notify(Topic.SAVED)
        return True

    def out_of_date(self) -> str | None:
        """What the saved file's settings no longer match in the current export ("num_workers
        2 -> 4, data_source stream -> copy-local"); None while it matches, or before a save."""
        if not self.saved_paths or self.bundle is None or self.saved_json is None:
            return None
        if self.saved_json == self.bundle.json_text:
            return None
        saved, now = (
            _leaves(json.loads(self.saved_json)),
            _leaves(json.loads(self.bundle.json_text)),
        )
        differ = [
            f"{name} {saved.get(name, '(none)')} -> {now.get(name, '(none)')}"
            for name in sorted(set(saved) | set(now))
            if saved.get(name) != now.get(name)
        ]
        more = f", and {len(differ) - _SHOWN} more" if len(differ) > _SHOWN else ""
        return ", ".join(differ[:_SHOWN]) + more if differ else "its text"

    def cache_entries(self) -> list[CacheEntry]:
        """What the home cache holds (`advisor.core.homecache`): local copies, caches, the
        demo's data, largest first."""
        from advisor.core import homecache

        return homecache.entries()

    def remove_cached(self, name: str) -> bool:
        """Remove `name` from the home cache (as `python -m advisor cache --remove NAME`);
        False, with the step's error saying why, for a name it does not hold or one being
        copied into."""
        from advisor.core import homecache

        try:
            homecache.remove(name)
        except (ValueError, OSError) as exc:
            self.context.set_error(STEP, describe(exc))
            return False
        self.context.set_error(STEP, None)
        self.context.notify(Topic.SAVED)
        return True

    def download_uri(self, kind: str = "module") -> str | None:
        """A data: URI of the generated module ("module") or JSON ("json") for a download link."""
        if self.bundle is None:
            return None
        if kind == "module":
            text, mime = self.bundle.module_source, "text/x-python"
        else:
            text, mime = self.bundle.json_text, "application/json"
        return f"data:{mime};base64,{base64.b64encode(text.encode()).decode()}"


_SHOWN = 4  # settings named in an out-of-date note; the rest counted


def _leaves(config: Any, prefix: str = "") -> dict[str, Any]:
    """A config's settings by name, nested ones (the loader's) by their own name."""
    if not isinstance(config, dict):
        return {prefix: config}
    found: dict[str, Any] = {}
    for name, value in config.items():
        found.update(_leaves(value, name) if isinstance(value, dict) else {name: value})
    return found

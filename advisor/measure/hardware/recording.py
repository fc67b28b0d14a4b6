"""Record the NVML answers a hardware probe receives, so that they can be replayed without a GPU.

`python -m advisor hardware --record-nvml FILE` wraps the NVML module in :class:`RecordingNvml`
while it probes: every call the probe makes, with its arguments, its answer or its NVML error
code, is written to FILE as JSON. A recording taken on a real GPU machine is how the project's
tests (and a bug report) replay that machine's answers on a machine without one.

Device handles are recorded as ``"gpu:<index>"``; structures (``nvmlMemory_t``) as dicts of their
fields. Only the calls the probe makes are recorded: no serial number, UUID or host name.
It wraps whichever NVML module it is given (pynvml is imported by advisor.measure.hardware alone).
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

__all__ = ["RecordingNvml", "write_recording"]

FORMAT = "loader-advisor/nvml-recording/1"
# Module attributes the probe reads as constants (not calls).
_CONSTANTS = ("NVML_ERROR_NOT_SUPPORTED", "NVML_FEATURE_ENABLED", "NVML_NVLINK_MAX_LINKS")


def _plain(value: Any) -> Any:
    """A JSON-able copy of an NVML answer: structures and objects become dicts of their fields."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, ctypes.Structure):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "__dict__"):  # an answer object with plain attributes
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


class RecordingNvml:
    """An NVML module stand-in that forwards every call to `module` and records it.

    Errors are re-raised unchanged after being recorded with their NVML code (`.value`), so the
    probe behaves exactly as it does against `module` itself.
    """

    def __init__(self, module: Any) -> None:
        self._module = module
        self._handles: dict[int, str] = {}
        self.calls: list[dict[str, Any]] = []

    @property
    def NVMLError(self) -> Any:  # pynvml's own name
        return self._module.NVMLError

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not name.startswith("nvml") or not callable(value):
            return value

        def call(*args: Any) -> Any:
            key = [self._handles.get(id(a), a) if not _is_plain(a) else a for a in args]
            entry: dict[str, Any] = {"fn": name, "args": [_plain(a) for a in key]}
            try:
                result = value(*args)
            except Exception as exc:
                entry.update(error=getattr(exc, "value", None), message=str(exc))
                self.calls.append(entry)
                raise
            if name == "nvmlDeviceGetHandleByIndex":
                self._handles[id(result)] = f"gpu:{args[0]}"
                entry["result"] = f"gpu:{args[0]}"
            else:
                entry["result"] = _plain(result)
            self.calls.append(entry)
            return result

        return call

    def recording(self, source: str) -> dict[str, Any]:
        """The recording as a JSON-able dict; `source` says where it was taken (no host name)."""
        constants = {n: getattr(self._module, n) for n in _CONSTANTS if hasattr(self._module, n)}
        return {"format": FORMAT, "source": source, "constants": constants, "calls": self.calls}


def _is_plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str, bytes))


def write_recording(nvml: RecordingNvml, path: str | Path, source: str) -> None:
    """Write `nvml`'s recording to `path` as indented JSON."""
    Path(path).write_text(json.dumps(nvml.recording(source), indent=1) + "\n", encoding="utf-8")

"""Replays an NVML recording (advisor.measure.hardware.recording) as a module the hardware probe
can call.

Every call is answered from the recording by its function name and arguments; a call the
recording does not hold raises `NotRecorded` (not an NVMLError), so the probe turns it into a note
and a test that asserts on notes sees that the replay was incomplete.
"""

from __future__ import annotations

import json
import types
from typing import Any


class ReplayedNVMLError(Exception):
    """pynvml.NVMLError's contract: the NVML return code in `.value`."""

    def __init__(self, value: int, message: str = "") -> None:
        super().__init__(message or f"NVML Error with code {value}")
        self.value = value


class NotRecorded(LookupError):
    pass


def _answer(value: Any) -> Any:
    return types.SimpleNamespace(**value) if isinstance(value, dict) else value


class ReplayNvml:
    NVMLError = ReplayedNVMLError

    def __init__(self, recording: dict[str, Any]) -> None:
        self.constants: dict[str, Any] = dict(recording.get("constants", {}))
        self.answers: dict[tuple[str, str], dict[str, Any]] = {}
        for entry in recording["calls"]:
            self.answers.setdefault((entry["fn"], json.dumps(entry["args"])), entry)

    def __getattr__(self, name: str) -> Any:
        if name in self.constants:
            return self.constants[name]
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            entry = self.answers.get((name, json.dumps(list(args))))
            if entry is None:
                raise NotRecorded(f"{name}{args} is not in the recording")
            if "error" in entry:
                raise ReplayedNVMLError(entry["error"], entry.get("message", ""))
            return _answer(entry["result"])

        return call

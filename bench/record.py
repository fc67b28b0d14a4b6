"""The run record every benchmark writes with its results: which command ran, when, at which
commit, for how long, and on what machine under what load.

    run = Run.begin("python -m bench e2e --quick")   # before the measurement
    ...                                             # measure
    record = run.write(out, {"rows": rows}, markdown=table)

The JSON is the record's header (`HEADER_KEYS`) followed by the benchmark's own keys; the
Markdown beside it, where a benchmark writes one, starts with `RunRecord.headline`. `header_of`
reads the header of a file written before this module (each benchmark had its own keys).

Importing this module loads nothing beyond the standard library: several benchmarks measure in
their own process (garbage collection in forked workers, a per-step cost) or run it as the
measured child, so the machine's description (`advisor.measure.hardware.host`, package
versions) is gathered when the record is written, after the measurement.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HEADER_KEYS = ("command", "date", "elapsed_s", "commit", "machine")
# The packages and tools whose versions a record names, where they are installed.
PACKAGES = ("boto3", "s3fs", "s3torchconnector", "awscrt", "torch")
TOOLS = (("nginx", "-v"), ("wrk", "-v"), ("curl", "--version"))


@dataclass(frozen=True)
class Machine:
    """The machine a run measured on (the `machine` object of the JSON).

    cpu: the CPU's model name ("" where the kernel does not say). cores: os.cpu_count().
    mem_gib: physical memory. kernel: platform.release(). versions: Python, the packages and
    tools in `PACKAGES` and `TOOLS` that are installed, and the native loader's libraries.
    load_before, load_after: the 1-minute load average as the run began and as it was recorded.
    """

    cpu: str
    cores: int
    mem_gib: float
    kernel: str
    versions: dict[str, str] = field(default_factory=dict)
    load_before: float = 0.0
    load_after: float = 0.0


@dataclass(frozen=True)
class RunRecord:
    """The header of a result JSON: `command` as typed, `date` the start (ISO 8601, UTC, to the
    second), `elapsed_s` from the start to this record, `commit` the checkout's short hash with
    "-dirty" where tracked files were changed ("" outside git)."""

    command: str
    date: str
    elapsed_s: float
    commit: str
    machine: Machine

    def header(self) -> dict[str, Any]:
        return asdict(self)

    def headline(self) -> str:
        """The first line of the Markdown beside the JSON."""
        m = self.machine
        started = datetime.fromisoformat(self.date)
        commit = f", commit {self.commit}" if self.commit else ""
        return (
            f"`{self.command}` on {started:%Y-%m-%d %H:%M} UTC ({self.elapsed_s:.0f} s{commit}). "
            f"Machine: {m.cpu or 'CPU not named'}, {m.cores} cores, {m.mem_gib} GiB, Linux "
            f"{m.kernel}; load average {m.load_before:.1f} before, {m.load_after:.1f} after."
        )


@dataclass(frozen=True)
class Run:
    """A benchmark run from its start: what its record needs to know before the measurement
    (no module is imported and no process started here)."""

    command: str
    started: datetime
    load_before: float
    t0: float

    @classmethod
    def begin(cls, command: str) -> Run:
        return cls(command, datetime.now(timezone.utc), os.getloadavg()[0], time.monotonic())

    def record(self) -> RunRecord:
        """The record as of now: elapsed time, load and the machine's description."""
        return RunRecord(
            command=self.command,
            date=self.started.isoformat(timespec="seconds"),
            elapsed_s=round(time.monotonic() - self.t0, 1),
            commit=commit(),
            machine=machine(self.load_before, os.getloadavg()[0]),
        )

    def write(
        self, path: Path, body: dict[str, Any], *, markdown: str | None = None, indent: int = 1
    ) -> RunRecord:
        """Write `path` (the header, then `body`) and, with `markdown`, the .md beside it (the
        headline, then `markdown`); the record written."""
        clash = set(HEADER_KEYS) & set(body)
        if clash:
            raise ValueError(f"a benchmark's results may not use the header's keys: {clash}")
        record = self.record()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record.header() | body, indent=indent, default=str) + "\n")
        if markdown is not None:
            path.with_suffix(".md").write_text(f"{record.headline()}\n\n{markdown}\n")
        return record


def begin(name: str, argv: Sequence[str] | None = None) -> Run:
    """`Run.begin` for `python -m bench NAME` with the options it was given (`argv`; this
    process's own where None)."""
    options = list(sys.argv[1:] if argv is None else argv)
    return Run.begin(" ".join(["python -m bench", name, *options]))


def commit(repo: Path = REPO) -> str:
    """The short hash of the checkout's HEAD, "-dirty" added where tracked files differ from it;
    "" where git or the checkout is missing."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{head}-dirty" if dirty else head


def machine(load_before: float, load_after: float) -> Machine:
    """The machine as a record names it (see `Machine`)."""
    import contextlib
    import platform
    import shutil
    from importlib import metadata

    from advisor.measure.hardware.host import cpu_model

    versions: dict[str, str] = {"python": platform.python_version()}
    for dist in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    with contextlib.suppress(Exception):
        import native_loader

        versions.update(native_loader.native_versions())
    for tool, flag in TOOLS:
        with contextlib.suppress(Exception):
            p = subprocess.run([shutil.which(tool) or tool, flag], capture_output=True, text=True)
            versions[tool] = (p.stdout + p.stderr).strip().splitlines()[0][:60]
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return Machine(
        cpu=cpu_model(),
        cores=os.cpu_count() or 1,
        mem_gib=round(mem_gib, 1),
        kernel=platform.release(),
        versions=versions,
        load_before=load_before,
        load_after=load_after,
    )


def header_of(data: Any) -> dict[str, Any]:
    """The header (`HEADER_KEYS`, None where a file lacks one) of a result JSON as loaded, this
    module's or one written before it: a bare list (advisor, advisor-check), "started" for
    "date" (e2e-large), the load averages beside the command (e2e-large, e2e-shards; a
    [1, 5, 15] minute list), or `machine` as one line of text (reshard, as {"description": ...})."""
    if not isinstance(data, dict):
        return dict.fromkeys(HEADER_KEYS)
    header = {key: data.get(key) for key in HEADER_KEYS}
    if header["date"] is None:
        header["date"] = data.get("started")
    if isinstance(header["machine"], str):
        header["machine"] = {"description": header["machine"]}
    if header["machine"] is None and "load_before" in data:

        def one_minute(load: Any) -> Any:
            return load[0] if isinstance(load, list) else load

        header["machine"] = {
            "load_before": one_minute(data.get("load_before")),
            "load_after": one_minute(data.get("load_after")),
        }
    return header


def results_of(data: Any) -> Any:
    """What a result JSON holds beyond its header: the list itself for a file written as a bare
    list before this module (advisor, advisor-check), now under "results"."""
    if isinstance(data, list):
        return data
    if set(data) - set(HEADER_KEYS) == {"results"}:
        return data["results"]
    return {k: v for k, v in data.items() if k not in HEADER_KEYS}

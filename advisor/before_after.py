"""Before and after: the user's loader against the one the advisor exports, on the same data,
through the same step, in the same loop.

`before_after(loader, uri, consumer_rate=...)` first diagnoses the user's loader (which also
gives the batch size the advice plans for), runs the advisor on `uri` with that workload
(profile, hardware, the live trial, the rules), writes the exported module to a scratch folder,
imports it, and compares its `make_dataloader()` with the user's loader, interleaved. The user's
loader is never modified. The headline (`advisor.report.before_after`) says what to change
and what it measured.
"""

from __future__ import annotations

import importlib.util
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from advisor.core import homecache
from advisor.core.bounds import LoopLimits, TrialBudget
from advisor.core.workload import Workload
from advisor.decide.judged import BeforeAfter, LocalCopyStep
from advisor.decide.recommend import Recommendation
from advisor.diagnosis.loop import as_step, compare, diagnose
from advisor.measure.loop.run import LoaderSource, LoopEvent, Step, batch_samples, fresh
from advisor.session import AdvisorSession
from native_loader import Credentials
from native_loader.local_copy import last_copy

__all__ = ["BeforeAfter", "LocalCopyStep", "advised_loader", "before_after", "changes",
           "exported_loader"]  # fmt: skip


def changes(
    loader: Any, recommendation: Recommendation, copy: LocalCopyStep | None = None
) -> tuple[str, ...]:
    """What the recommendation changes in `loader`'s settings, in the DataLoader's words, after
    the copy to local disk where it makes one (`copy`). A loader that is not a torch
    DataLoader shows no settings to compare: only the reader."""
    out = [copy.change()] if copy is not None else []
    settings = (
        ("num_workers", recommendation.num_workers),
        ("prefetch_factor", recommendation.prefetch_factor if recommendation.num_workers else None),
        ("pin_memory", recommendation.pin_memory),
    )
    for name, new in settings:
        if new is None or not hasattr(loader, name):
            continue
        old = getattr(loader, name)
        if old is None and name == "prefetch_factor":
            continue  # no workers before: there was nothing to prefetch, num_workers says it
        if old != new:
            out.append(f"{name} {old} -> {new}")
    return (*out, "the native reader")


def _import_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_advisor_export_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the exported module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported_loader(session: AdvisorSession, directory: Path) -> Any:
    """The session's exported module, written to `directory`, imported, and its
    `make_dataloader()`, given the session's credentials in this process: the file holds
    none, and a kernel without AWS variables (the demo's endpoint) reads all the same."""
    return advised_loader(session, directory)[0]


def advised_loader(
    session: AdvisorSession, directory: Path, progress: Callable[[str], None] | None = None
) -> tuple[Any, LocalCopyStep | None]:
    """`exported_loader`, and its copy to local disk where it makes one: the module's
    `prepare()` run first and timed (`progress` gets its lines), so that the copy is a step
    measured and named, not a hidden part of the loader's first batch."""
    module = _import_module(session.save_export(directory, "recommended_loader")[0])
    copy = None
    if module.CONFIG.get("local_copy_dir"):
        started, wall = time.monotonic(), time.time()
        folder = module.prepare(progress=progress, credentials=session.credentials)
        seconds, report = time.monotonic() - started, last_copy(folder)
        fresh = report is not None and report.finished >= wall
        copy = LocalCopyStep(folder, report, seconds, homecache.summary(), fresh)
        # the advice's figure for the copy is now the one this prepare() measured
        session.record_local_copy(report)
    return module.make_dataloader(credentials=session.credentials), copy


def before_after(
    loader: LoaderSource,
    uri: str,
    step: Step | None = None,
    *,
    seconds_per_batch: float | None = None,
    consumer_rate: float | None = None,
    endpoint_url: str | None = None,
    aws_profile: str | None = None,
    anonymous: bool = False,
    credentials: Credentials | None = None,
    transform: str | None = None,
    trial_seconds: float = TrialBudget.seconds,
    limits: LoopLimits | None = None,
    rounds: int = 2,
    samples_of: Callable[[Any], int] = batch_samples,
    progress: Callable[[str, float | None], None] | None = None,
    cancel: threading.Event | None = None,
) -> BeforeAfter:
    """Diagnose `loader`, advise on `uri` for the same step, and compare the two loaders.
    `credentials` (else the standard AWS chain) serve the advice and the exported loader in
    this process; the exported file never holds them."""
    chosen = as_step(
        step, seconds_per_batch=seconds_per_batch, consumer_rate=consumer_rate,
        samples_of=samples_of,
    )  # fmt: skip

    def loop_progress(event: LoopEvent) -> None:
        if progress is not None:
            progress(f"{event.label}: {event.message}", event.fraction)

    first = diagnose(loader, chosen, limits=limits, samples_of=samples_of,
                     progress=loop_progress, cancel=cancel)  # fmt: skip
    s = first.summary
    batch = max(1, round(s.samples / s.batches))
    rate = _consumer_rate(consumer_rate, seconds_per_batch, s.step_s, batch)
    session = AdvisorSession()
    session.set_location(
        uri,
        endpoint_url=endpoint_url,
        aws_profile=aws_profile,
        credentials=credentials,
        anonymous=anonymous,
    )
    session.set_workload(Workload(consumer_rate=rate, batch_size=batch, transform=transform))
    if progress is not None:
        progress("advising on the same data", 0.0)
    session.run_profile()
    session.run_hardware()
    session.run_trial(
        trial_seconds,
        progress=(lambda e: progress(e.message, e.fraction)) if progress else None,
        cancel=cancel,
    )
    recommendation = session.run_recommend()
    with tempfile.TemporaryDirectory(prefix="advisor-before-after-") as scratch:
        # the copy's lines carry their own share of the bytes: no fraction of the whole run
        say = (lambda line: progress(f"local copy: {line}", None)) if progress else None
        exported, copy = advised_loader(session, Path(scratch), say)
        recommendation = session.recommendation or recommendation  # with the copy's figure
        comparison = compare(
            loader, exported, chosen, limits=limits, rounds=rounds, samples_of=samples_of,
            progress=loop_progress, cancel=cancel,
        )  # fmt: skip
    # a loader given as a function is made once more, only to read its settings
    settings = loader if isinstance(loader, Iterable) else fresh(loader)
    changed = changes(settings, recommendation, copy)
    session.record_comparison(comparison, changed)
    return BeforeAfter(first, recommendation, comparison, changed, copy)


def _consumer_rate(
    consumer_rate: float | None, seconds_per_batch: float | None, step_s: Any, batch: int
) -> float | None:
    """The samples/s the step consumes, for the advice: given, or the batch over the step's
    time (given, or the median the loop measured for the user's own step)."""
    if consumer_rate is not None:
        return consumer_rate
    seconds = seconds_per_batch if seconds_per_batch is not None else getattr(step_s, "median", 0)
    return batch / seconds if seconds and seconds > 0 else None

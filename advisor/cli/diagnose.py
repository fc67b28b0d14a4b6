"""`python -m advisor diagnose module:function ...`: the user's loader in a training loop, and with
`--uri` the recommended loader beside it (before, after, ratio)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from advisor.core.bounds import CompareRounds, LoopLimits, TrialBudget, arg_type, range_of
from advisor.core.errors import CommandErrors, report_error
from advisor.core.workload import STEP_TIME_S, Workload
from advisor.decide.history import LoopRecord, keep

if TYPE_CHECKING:
    from advisor.measure.loop.run import LoopEvent

PROGRESS_EVERY_S = 1.0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "diagnose",
        parents=[common],
        help="is your loader keeping training waiting? (and, with --uri, the advice beside it)",
        description="Run LOADER (module:function returning an iterable of batches, usually your "
        "DataLoader) in a training loop and report how long each step waits for data. With "
        "--uri, advise on that data for the same step and compare the exported loader with "
        "yours in the same loop.",
    )
    p.add_argument("loader", metavar="LOADER", help="module:function that returns your loader")
    add_arguments(p, step_help="module:callable: your step, called with each batch")


def add_arguments(p: argparse.ArgumentParser, step_help: str) -> None:
    """The step, the bounds and the --uri comparison: the CLI's and the `%advisor diagnose`
    magic's arguments (which name the loader and the step differently)."""
    step = p.add_mutually_exclusive_group(required=True)
    step.add_argument("--step", metavar="STEP", help=step_help)
    step.add_argument(
        "--step-time", type=arg_type(STEP_TIME_S, "--step-time"),
        help=f"seconds the step blocks per batch, {STEP_TIME_S}",
    )  # fmt: skip
    rate = range_of(Workload, "consumer_rate")
    step.add_argument(
        "--consumer-rate", type=arg_type(rate, "--consumer-rate"),
        help=f"samples/s one GPU's step consumes with its data already loaded: batch size / "
        f"the step time your training log shows (the step blocks for batch / rate), {rate}",
    )  # fmt: skip
    for name, flag, what in (
        ("max_batches", "--batches", "batches at most per run"),
        ("max_seconds", "--seconds", "seconds at most per run"),
        ("batch_timeout_s", "--batch-timeout", "seconds without a batch before the loader is hung"),
    ):
        bound, default = range_of(LoopLimits, name), getattr(LoopLimits, name)
        p.add_argument(
            flag, dest=name, type=arg_type(bound, flag), default=default,
            help=f"{what}, {bound} (default {default:g})",
        )  # fmt: skip
    p.add_argument("--uri", help="the data your loader reads: advise on it and compare")
    p.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS / env)")
    p.add_argument("--profile", dest="aws_profile", help="AWS profile name")
    p.add_argument(
        "--anonymous", action="store_true",
        help="with --uri: a public bucket, read with unsigned requests (no credentials)",
    )  # fmt: skip
    p.add_argument("--transform", help="with --uri: the per-sample transform, 'module:callable'")
    p.add_argument(
        "--trial-seconds", type=arg_type(range_of(TrialBudget, "seconds"), "--trial-seconds"),
        default=TrialBudget.seconds, help="with --uri: the advisor's trial budget",
    )  # fmt: skip
    p.add_argument(
        "--rounds", type=arg_type(range_of(CompareRounds, "rounds"), "--rounds"), default=2,
        help="with --uri: interleaved runs of each loader (default 2)",
    )  # fmt: skip


def load_object(spec: str, what: str) -> Any:
    """The user's "package.module:function", found from the current folder as `python -m`
    and a notebook see it (`native_loader.decoders.load_callable` says what is wrong)."""
    if "" not in sys.path:
        sys.path.insert(0, "")
    from native_loader.decoders import load_callable  # torch: only once a loader is named

    return load_callable(spec, what)


def run(args: argparse.Namespace) -> int:
    try:
        loader = load_object(args.loader, "loader")
        step = load_object(args.step, "step") if args.step else None
    except ValueError as exc:
        return report_error(exc)
    return execute(loader, step, args)


def execute(loader: Any, step: Any, args: argparse.Namespace) -> int:
    """Diagnose `loader` (an iterable or a function that makes one) with `step` or the step the
    arguments give; print the result; the exit status."""
    from advisor.before_after import before_after
    from advisor.diagnosis import diagnose
    from advisor.measure.loop.run import LoaderError
    from advisor.report.before_after import before_after_dict, before_after_lines
    from advisor.report.diagnosis import diagnosis_lines

    cancel = threading.Event()
    limits = LoopLimits(
        max_batches=args.max_batches, max_seconds=args.max_seconds,
        batch_timeout_s=args.batch_timeout_s,
    )  # fmt: skip
    quiet = args.quiet or args.json

    last = [0.0]

    def progress(message: str, fraction: float | None) -> None:
        # a line a second at most: a loop reports every batch; None: the line says its share
        if not quiet and time.monotonic() - last[0] >= PROGRESS_EVERY_S:
            last[0] = time.monotonic()
            share = "" if fraction is None else f" ({fraction:.0%})"
            print(f"... {message[:70]}{share}", file=sys.stderr, flush=True)

    def on_event(event: LoopEvent) -> None:
        progress(f"{event.label}: {event.message}", event.fraction)

    with CommandErrors(cancel=cancel, own=(LoaderError,)) as failed:
        steps = dict(step=step, seconds_per_batch=args.step_time, consumer_rate=args.consumer_rate)
        if args.uri:
            result = before_after(
                loader, args.uri, **steps, endpoint_url=args.endpoint_url,
                aws_profile=args.aws_profile, anonymous=args.anonymous, transform=args.transform,
                trial_seconds=args.trial_seconds, limits=limits, rounds=args.rounds,
                progress=progress, cancel=cancel,
            )  # fmt: skip
            lines, data = before_after_lines(result), before_after_dict(result)
        else:
            diagnosis = diagnose(loader, **steps, limits=limits, progress=on_event, cancel=cancel)
            lines, data = diagnosis_lines(diagnosis), diagnosis.to_dict()
            # kept in the run history (a before/after is kept by its session)
            loop = LoopRecord.of_diagnosis(diagnosis)
            keep(dataclasses.replace(loop, label=getattr(args, "loader", None) or loop.label))
    if failed.code is not None:
        return failed.code
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print("\n".join(lines))
    return 0

"""`python -m advisor profile|hardware|trial|recommend|export|reshard|diagnose|cache|history ...`:
the headless advisor.

Human-readable tables by default, one JSON object with --json. Every failure is one line on
stderr and a non-zero exit: 2 for bad input, 1 for what went wrong talking to the storage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from advisor.cli import diagnose as diagnose_cli
from advisor.cli import history as history_cli
from advisor.core import homecache
from advisor.core.bounds import (
    ListingLimits,
    Range,
    TrialBudget,
    arg_type,
    module_path_type,
    range_of,
)
from advisor.core.errors import CommandErrors
from advisor.core.location import check_answers, first_contact_s
from advisor.core.workload import STEP_TIME_S, Workload
from advisor.decide.resharding import advises_reshard
from advisor.export import ExportBundle, build_export
from advisor.measure.hardware.recording import RecordingNvml, write_recording
from advisor.measure.hardware.target import TargetMachine, target_arguments, target_from_args
from advisor.measure.trial.data import TrialEvent
from advisor.report import gpu_rows, hardware_rows, profile_rows, text_table, trial_rows
from advisor.report.headline import headline_lines
from advisor.report.measured import measured_lines
from advisor.report.recommendation import recommendation_summary
from advisor.reshard import cli as reshard_cli
from advisor.reshard.advice import reshard_command
from advisor.session import AdvisorSession
from native_loader.sample_errors import ON_ERROR, SamplePolicy

ANONYMOUS_HELP = "a public bucket: send unsigned requests, no credentials (the export too)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m advisor",
        description="Loader Advisor: profile a data set and the machine, measure, recommend "
        "a PyTorch DataLoader configuration and export it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_argument("--quiet", action="store_true", help="no progress output")
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument("uri", help="s3://bucket/prefix/ or a local folder")
    data.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS / env)")
    data.add_argument("--profile", dest="aws_profile", help="AWS profile name")
    data.add_argument("--anonymous", action="store_true", help=ANONYMOUS_HELP)
    data.add_argument(
        "--max-keys",
        type=arg_type(range_of(ListingLimits, "max_keys"), "--max-keys"),
        default=ListingLimits.max_keys,
        help=f"keys listed at most, {range_of(ListingLimits, 'max_keys')} "
        f"(default {ListingLimits.max_keys})",
    )
    work = argparse.ArgumentParser(add_help=False)
    work.add_argument(
        "--consumer-rate",
        type=arg_type(range_of(Workload, "consumer_rate"), "--consumer-rate"),
        help=f"samples/s one GPU consumes, {range_of(Workload, 'consumer_rate')}: batch size / "
        "the time of one training step with data already loaded (your training log's step "
        "time, or the headspace `advisor diagnose` measures with your step)",
    )
    work.add_argument(
        "--step-time",
        type=arg_type(STEP_TIME_S, "--step-time"),
        help=f"seconds per training step (with --batch-size), {STEP_TIME_S}: the step's own "
        "time with data already loaded, as your training log shows it",
    )
    for name, what in (
        ("batch_size", "samples per batch per rank"),
        ("epochs", "passes over the data set"),
        ("nodes", "training nodes"),
    ):
        flag = "--" + name.replace("_", "-")
        bound, default = range_of(Workload, name), getattr(Workload, name)
        work.add_argument(
            flag,
            type=arg_type(bound, flag),
            default=default,
            help=f"{what}, {bound} (default {default})",
        )
    gpus = range_of(Workload, "gpus_per_node")
    work.add_argument(
        "--gpus-per-node",
        type=arg_type(gpus, "--gpus-per-node"),
        help=f"GPUs (ranks) per node, {gpus} (default: the target instance's, else 1)",
    )
    work.add_argument("--transform", help="per-sample transform to time, 'module:callable'")
    work.add_argument(
        "--get-limit",
        type=arg_type(range_of(Workload, "get_limit"), "--get-limit"),
        help="GET/s your storage serves per key prefix before it answers 503 SlowDown "
        "(default: S3's published limits on AWS; none checked on other endpoints)",
    )
    target = target_arguments()
    trial = argparse.ArgumentParser(add_help=False)
    trial.add_argument(
        "--seconds",
        type=arg_type(range_of(TrialBudget, "seconds"), "--seconds"),
        default=TrialBudget.seconds,
        help=f"trial time budget, {range_of(TrialBudget, 'seconds')} "
        f"(default {TrialBudget.seconds:g})",
    )

    policy = argparse.ArgumentParser(add_help=False)
    policy.add_argument(
        "--on-error",
        choices=ON_ERROR,
        default=SamplePolicy.on_error,
        help="the exported loader, on a sample that fails to read or decode: raise naming the "
        "object (default), or skip it and count it",
    )
    policy.add_argument(
        "--max-skipped-share",
        type=arg_type(Range(0, 1), "--max-skipped-share"),
        default=SamplePolicy.max_skipped_share,
        help="with --on-error skip: raise once more than this share of the samples seen failed, "
        f"from 0 to 1 (default {SamplePolicy.max_skipped_share:g})",
    )

    sub.add_parser("profile", parents=[common, data], help="object count, sizes, formats")
    hw = sub.add_parser("hardware", parents=[common, target], help="GPUs, cores, RAM, disk")
    hw.add_argument(
        "--record-nvml",
        metavar="PATH",
        type=Path,
        help="also write every NVML answer the probe received to PATH (JSON, for replay)",
    )
    sub.add_parser(
        "trial", parents=[common, data, work, target, trial], help="time-bounded live trial"
    )
    rec = sub.add_parser(
        "recommend",
        parents=[common, data, work, target, trial, policy],
        help="decision-flow recommendation",
    )
    rec.add_argument("--no-trial", action="store_true", help="answer from the model only")
    rec.add_argument(
        "--export",
        metavar="PATH",
        type=module_path_type("--export"),
        help="also write the DataLoader module to PATH (and .json beside it)",
    )
    exp = sub.add_parser(
        "export",
        parents=[common, data, work, target, trial, policy],
        help="write a runnable DataLoader module and JSON",
    )
    exp.add_argument(
        "--output",
        type=module_path_type("--output"),
        default=Path("dataloader_config.py"),
        help="module path (default ./dataloader_config.py)",
    )
    exp.add_argument("--no-trial", action="store_true", help="answer from the model only")
    reshard_cli.add_parser(sub, common)
    diagnose_cli.add_parser(sub, common)
    homecache.add_parser(sub, common)
    history_cli.add_parser(sub, common)
    return parser


def _workload(args: argparse.Namespace, target: TargetMachine | None = None) -> Workload:
    gpus_per_node = args.gpus_per_node
    if gpus_per_node is None:  # a catalogued node's GPUs are its ranks
        gpus_per_node = target.gpus if target is not None and target.gpus else 1
    extra = dict(
        epochs=args.epochs,
        nodes=args.nodes,
        gpus_per_node=gpus_per_node,
        transform=args.transform,
        get_limit=args.get_limit,
    )
    if args.step_time is not None:
        return Workload.from_step_time(args.step_time, args.batch_size, **extra)
    return Workload(consumer_rate=args.consumer_rate, batch_size=args.batch_size, **extra)


class _Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, message: str, fraction: float) -> None:
        if not self.enabled or message == self.last:
            return
        self.last = message
        if self.tty:
            filled = int(max(0.0, min(1.0, fraction)) * 30)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {message[:60]:60s}")
            sys.stderr.flush()
        else:
            print(f"... {message}", file=sys.stderr, flush=True)

    def trial(self, event: TrialEvent) -> None:
        self(event.message, event.fraction)

    def done(self) -> None:
        if self.enabled and self.tty and self.last:
            sys.stderr.write("\n")


def _print_rows(rows: Sequence[tuple[str, str]], then: Callable[[], None] | None = None) -> None:
    """The report's rows as the wizard shows them, then what `then` prints, then their notes."""
    print(text_table([(label, value) for label, value in rows if label != "note"]))
    if then is not None:
        then()
    for label, value in rows:
        if label == "note":
            print(f"note: {value}")


def _print_profile(session: AdvisorSession) -> None:
    assert session.profile is not None
    _print_rows(profile_rows(session.profile))


def _print_hardware(session: AdvisorSession) -> None:
    hardware, machine = session.hardware, session.machine
    assert hardware is not None
    if hardware.target is not None and machine is not None:
        print("planned for the training machine (the model carries what the trial measures here):")
        _print_rows(gpu_rows(hardware) + hardware_rows(hardware))
        print("\nmeasured on this machine:")
        _print_rows(gpu_rows(machine) + hardware_rows(machine))
        return
    _print_rows(gpu_rows(hardware) + hardware_rows(hardware))


def _print_trial(session: AdvisorSession) -> None:
    assert session.trial is not None
    _print_rows(trial_rows(session.trial), then=lambda: _print_measured(session))


def _print_measured(session: AdvisorSession) -> None:
    """The trial's storage probe by requests at once, and what training saw per count."""
    assert session.trial is not None
    on_s3 = session.location is None or session.location.is_s3
    records = bool(session.profile and session.profile.record_format)
    for line in measured_lines(session.trial, on_s3=on_s3, records=records):
        print(line)


def _print_recommendation(session: AdvisorSession) -> None:
    r = session.recommendation
    assert r is not None
    # the answer first: what to change, its measured effect and the verdict; the bottleneck
    # with its reasons is the summary's (advisor.report.headline)
    for line in headline_lines(r, session.trial, session.workload.consumer_rate, brief=True):
        print(line)
    print()
    print(recommendation_summary(r))
    if session.location is not None and advises_reshard(r, session.profile):
        print(f"\nre-shard first:  {_reshard_command(session)}")


def _reshard_command(session: AdvisorSession) -> str:
    r, location = session.recommendation, session.location
    assert r is not None and location is not None
    command = reshard_command(location.uri, r.shard_size_bytes, location.endpoint_url)
    return command + (" --anonymous" if location.anonymous else "")


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_dict() if callable(to_dict) else dataclasses.asdict(value)
    return value


def _nvml_recorder() -> RecordingNvml:
    from advisor.measure.hardware import load_pynvml

    module, why = load_pynvml()
    if module is None:
        raise ValueError(f"--record-nvml needs NVML: {why}")
    return RecordingNvml(module)


def _export(session: AdvisorSession, args: argparse.Namespace) -> ExportBundle:
    from advisor.demo.server import takes_dummy_keys

    assert session.location is not None and session.recommendation is not None
    on_error = SamplePolicy(args.on_error, args.max_skipped_share)
    return build_export(
        session.location, session.recommendation, session.workload, session.profile, on_error,
        demo=session.demo_layout is not None,
            demo_dummy_keys=takes_dummy_keys(session.credentials),
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.command == "reshard":
        return reshard_cli.run(args)
    if args.command == "diagnose":
        return diagnose_cli.run(args)
    if args.command == "cache":
        return homecache.run(args)
    if args.command == "history":
        return history_cli.run(args)
    session = AdvisorSession()
    progress = _Progress(enabled=not args.quiet)
    cancel = threading.Event()
    with CommandErrors(cancel=cancel, finish=progress.done) as failed:
        target = target_from_args(args) if args.command != "profile" else None
        if args.command == "hardware":
            recorder = _nvml_recorder() if args.record_nvml else None
            if target is not None and target.gpus:
                session.set_workload(Workload(gpus_per_node=target.gpus))
            probed = session.run_hardware(args.target_gpu, nvml=recorder, target=target)
            if recorder is not None:
                here = session.machine or probed
                source = ", ".join(g.name for g in here.gpus) or "no GPU"
                write_recording(recorder, args.record_nvml, source)
            result: dict[str, Any] = {"hardware": _to_json(session.hardware)}
            printers = [_print_hardware]
        else:
            location = session.set_location(
                args.uri,
                endpoint_url=args.endpoint_url,
                aws_profile=args.aws_profile,
                anonymous=args.anonymous,
            )
            if location.is_s3:
                where = location.endpoint_url or "S3"
                progress(f"contacting {where} (an answer within {first_contact_s():g} s)", 0.0)
                check_answers(location, session.credentials)
            if args.command != "profile":
                session.set_workload(_workload(args, target))
            session.run_profile(progress=progress, max_keys=args.max_keys)
            result = {"profile": _to_json(session.profile)}
            printers = [_print_profile]
            if args.command != "profile":
                session.run_hardware(args.target_gpu, session.workload.gpus_per_node, target=target)
                result["hardware"] = _to_json(session.hardware)
                if target is not None:
                    result["measured_on"] = _to_json(session.machine)
                printers.append(_print_hardware)
            if args.command == "trial" or (
                args.command in ("recommend", "export") and not args.no_trial
            ):
                session.run_trial(args.seconds, progress=progress.trial, cancel=cancel)
                result["trial"] = _to_json(session.trial)
                printers.append(_print_trial)
            if args.command in ("recommend", "export"):
                recommendation = session.run_recommend()
                result.update(_to_json(recommendation))
                result["recommendation"] = _to_json(recommendation)
                if advises_reshard(recommendation, session.profile):
                    result["reshard_command"] = _reshard_command(session)
                printers.append(_print_recommendation)
                export_path = args.export if args.command == "recommend" else args.output
                if export_path is not None:
                    module, data = _export(session, args).save(export_path.parent, export_path.stem)
                    result["exported"] = {"module": str(module), "json": str(data)}
    if failed.code is not None:
        return failed.code
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        for printer in printers:
            printer(session)
            print()
        if "exported" in result:
            print(f"wrote {result['exported']['module']} and {result['exported']['json']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run(args)

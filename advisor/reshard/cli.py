"""`python -m advisor reshard SRC DST ...`: arguments, the progress bar and the printed plan."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
from typing import Any

from advisor.core.bounds import Range, arg_type
from advisor.core.errors import EXIT_RUNTIME, CommandErrors
from advisor.core.location import DatasetLocation, check_answers
from advisor.core.units import any_size, mb_per_s
from advisor.reshard import (
    Estimate,
    ReshardConfig,
    ReshardEvent,
    dry_run,
    finalize,
    parse_size,
    reshard,
    verify,
)
from advisor.reshard.advice import reshard_command
from advisor.reshard.config import LABEL_MODES


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_in(low: int, high: int, name: str, unit: str = "") -> Any:
    return arg_type(Range(low, high, int, unit=unit), name)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "reshard",
        parents=[common],
        help="pack small objects into deterministic WebDataset tar shards",
        description="Pack SRC (s3://bucket/prefix/ or a folder) into tar shards at DST. Reruns "
        "resume; RANK/WORLD_SIZE (torchrun) split the work; the last rank writes shards.json.",
    )
    p.add_argument("source", metavar="SRC", help="s3://bucket/prefix/ or a local folder")
    p.add_argument("destination", metavar="DST", help="s3://bucket/prefix/ or a local folder")
    p.add_argument("--shard-size", type=_size, default=128 * 10**6, help="default 128MB")
    p.add_argument("--seed", type=_int_in(0, 2**63 - 1, "--seed"), default=0)
    p.add_argument("--labels", choices=LABEL_MODES, default="auto", help="parent folder -> .cls")
    p.add_argument("--dry-run", action="store_true", help="print the plan and estimate, stop")
    p.add_argument("--verify", action="store_true", help="re-read and check every shard after")
    p.add_argument(
        "--finalize", action="store_true", help="only write shards.json (all ranks done)"
    )
    p.add_argument("--rank", type=_int_in(0, 100_000, "--rank"), help="default $RANK or 0")
    p.add_argument(
        "--world-size", type=_int_in(1, 100_000, "--world-size"), help="default $WORLD_SIZE or 1"
    )
    concurrency = _int_in(1, 1024, "--read-concurrency", "requests")
    p.add_argument("--read-concurrency", type=concurrency, default=64)
    p.add_argument("--max-memory", type=_size, default=2 * 2**30, help="default 2GiB")
    p.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS / env)")
    p.add_argument("--profile", dest="aws_profile", help="AWS profile name")
    p.add_argument(
        "--anonymous", action="store_true",
        help="the source is a public bucket: read it unsigned (the destination is written with "
        "your credentials)",
    )  # fmt: skip


_STDOUT = threading.Lock()


def write_json_line(obj: dict[str, Any]) -> None:
    """One JSON object per line, in one write: the writer pool's threads emit concurrently, and
    under torchrun every rank shares one stdout, where a write of up to PIPE_BUF bytes is atomic
    but a line that `print` splits into text and newline can get another line glued into it."""
    with _STDOUT:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


class _Bar:
    """Progress on stderr: a bar on a terminal, else a line per shard; JSON lines with --json."""

    def __init__(self, quiet: bool, as_json: bool) -> None:
        self.quiet, self.as_json, self.tty = quiet, as_json, sys.stderr.isatty()
        self.drawn = False

    def __call__(self, event: ReshardEvent) -> None:
        if self.as_json:
            write_json_line({"event": event.to_dict()})
            return
        if self.quiet or (event.kind == "progress" and not self.tty):
            return
        eta = f"ETA {event.eta_s:.0f} s" if event.eta_s is not None else "ETA ?"
        line = (
            f"{event.shards_done}/{event.shards_total} shards  {event.samples_per_s:.0f} samples/s "
            f"{mb_per_s(event.mb_per_s)}  {eta}  retries {event.retries} "
            f"throttled {event.throttled}"
        )
        if event.kind in ("listing", "plan", "finalized", "skip", "verify", "wait", "cleanup"):
            line = event.message
        if self.tty:
            filled = int(event.fraction * 24)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (24 - filled)}] {line[:90]:90s}")
            self.drawn = True
        else:
            print(f"... {line}", file=sys.stderr)
        sys.stderr.flush()

    def done(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            self.drawn = False


def print_estimate(e: Estimate, args: argparse.Namespace) -> None:
    print(
        f"plan: {e.shards} shards, {e.samples:,} samples from {e.objects:,} objects "
        f"({any_size(e.source_bytes)} -> {any_size(e.tar_bytes)} of tar)"
    )
    if e.classes:
        print(f"labels: {e.classes} classes from the parent folders (.cls, classes.json)")
    if e.skipped:
        print(f"skipped: {e.skipped} files without an extension or with a hidden name")
    print("shard sizes:")
    for lower, count in e.histogram:
        print(f"  {any_size(lower):>9} - {any_size(2 * lower):>9}  {count:>6} shards")
    print(
        f"requests: {e.get_requests:,} GET, {e.put_requests:,} PUT, {e.list_requests:,} LIST"
        f" (about ${e.request_cost_usd:.4f} at AWS S3 Standard request prices)"
    )
    print(
        f"probe: {e.probe_objects} objects read at {e.probe_objects_per_s:,.0f} objects/s "
        f"({mb_per_s(e.probe_read_mb_per_s)}); destination write "
        f"{mb_per_s(e.probe_write_mb_per_s)}"
    )
    print(
        f"estimate: {e.seconds:,.0f} s (reading {e.read_seconds:,.0f} s, writing "
        f"{e.write_seconds:,.0f} s, overlapped)"
    )
    command = reshard_command(
        args.source, args.shard_size, args.endpoint_url, args.destination, args.seed
    )
    print(f"run: {command}")


def run(args: argparse.Namespace) -> int:
    bar = _Bar(args.quiet, args.json)
    cancel = threading.Event()
    where = dict(endpoint_url=args.endpoint_url, profile=args.aws_profile)
    result: dict[str, Any] = {}
    interrupted = "interrupted; committed shards are kept, rerun to resume"
    with CommandErrors(cancel=cancel, finish=bar.done, interrupted=interrupted) as failed:
        config = ReshardConfig(
            shard_size=args.shard_size,
            seed=args.seed,
            labels=args.labels,
            read_concurrency=args.read_concurrency,
            max_memory_bytes=args.max_memory,
        )
        for uri in dict.fromkeys((args.source, args.destination)):
            public = args.anonymous and uri == args.source
            location = DatasetLocation(uri, args.endpoint_url, args.aws_profile, anonymous=public)
            if location.is_s3:  # an endpoint that never answers: seconds, not minutes
                check_answers(location)
        if args.dry_run:
            est = dry_run(
                args.source, args.destination, config, progress=bar,
                anonymous_source=args.anonymous, **where,
            )  # fmt: skip
            bar.done()
            if args.json:
                write_json_line({"estimate": dataclasses.asdict(est)})
            else:
                print_estimate(est, args)
            return 0
        if args.finalize:
            result["index"] = finalize(args.destination, **where)
        else:
            outcome = reshard(
                args.source,
                args.destination,
                config,
                rank=args.rank,
                world_size=args.world_size,
                progress=bar,
                cancel=cancel,
                anonymous_source=args.anonymous,
                **where,
            )
            result["result"] = dataclasses.asdict(outcome)
        if args.verify:
            report = verify(args.destination, progress=bar, cancel=cancel, **where)
            result["verify"] = dataclasses.asdict(report)
    if failed.code is not None:
        return failed.code
    problems = "verify" in result and bool(result["verify"]["problems"])
    if args.json:
        write_json_line(result)
    else:
        _print_result(result)
    return EXIT_RUNTIME if problems else 0


def _print_result(result: dict[str, Any]) -> None:
    if "result" in result:
        r = result["result"]
        print(
            f"rank {r['rank']} of {r['world_size']}: wrote {r['shards_written']} shards "
            f"({r['samples_written']:,} samples, {any_size(r['bytes_written'])}) "
            f"in {r['seconds']:.1f} s; "
            f"{r['shards_skipped']} already committed; {r['retries']} retries"
        )
        if r["cleaned"]:
            print(f"cleaned up {r['cleaned']} leftovers of an interrupted run")
        if r["index_url"]:
            print(f"index: {r['index_url']}")
        else:
            print(
                "index: not yet (other ranks' shards are not all committed; "
                "the last rank writes it)"
            )
    if "index" in result:
        print(f"index: {result['index']}")
    if "verify" in result:
        v = result["verify"]
        status = "OK" if not v["problems"] else f"{len(v['problems'])} problems"
        print(
            f"verify: {status}: {v['shards_checked']} shards, {v['samples_checked']:,} samples, "
            f"{v['members_checked']:,} members "
            f"({v['md5_checked']:,} MD5-checked against the source)"
        )
        for problem in v["problems"][:20]:
            print(f"  {problem}")

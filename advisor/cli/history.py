"""`python -m advisor history [--dataset URI] [--last N] [--compare A B]` (and `%advisor history`):
the runs every process kept, side by side, of one data set or all; two of them compared with
their spreads. The history is removed like the rest of the home cache:
`python -m advisor cache --remove history`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from advisor.decide.history.records import kind_of, record_to_dict
from advisor.decide.history.store import REMOVE, HistoryError, RunStore
from advisor.report.history import compare_lines, history_table

LAST = 50  # runs listed by default: a watched run keeps one an epoch


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "history",
        parents=[common],
        help="the runs kept across sessions (trials, comparisons, watched epochs); compare two",
        description="List the trials (with the answer made from each), the comparisons of "
        "your loader with the recommended one and the loops judged (advisor.watch's epochs, "
        f"diagnose runs) that every process kept, oldest first. `{REMOVE}` removes them.",
    )
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The CLI's and the `%advisor history` magic's arguments."""
    p.add_argument("--dataset", metavar="URI", help="only the runs of this data set")
    p.add_argument("--last", type=_positive, default=LAST, help=f"the last N runs (default {LAST})")
    p.add_argument(
        "--compare", nargs=2, type=_number, metavar=("A", "B"),
        help="two runs' figures side by side with their spreads (numbers as listed: 3 or #3)",
    )  # fmt: skip


def run(args: argparse.Namespace, store: RunStore | None = None) -> int:
    """Print the history or the comparison; the exit status (1: the history cannot be read,
    2: a run it does not hold, or two of different kinds)."""
    store = store or RunStore()
    try:
        history = store.load(dataset=args.dataset, last=None if args.compare else args.last)
    except HistoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.compare:
        first, second = (history.run(number) for number in args.compare)
        if first is None or second is None:
            missing = args.compare[0] if first is None else args.compare[1]
            print(f"error: the run history holds no run #{missing}", file=sys.stderr)
            return 2
        try:
            lines = compare_lines(first, second)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.json:
            data = [{"kind": kind_of(r), **record_to_dict(r)} for r in (first, second)]
            print(json.dumps({"compare": data, "lines": lines}, indent=2))
        else:
            print("\n".join(lines))
        return 0
    if args.json:
        data = [{"kind": kind_of(r), **record_to_dict(r)} for r in history.runs()]
        print(json.dumps({"path": str(store.path), "runs": data}, indent=2))
        return 0
    of = f" of {args.dataset}" if args.dataset else ""
    print(f"{store.path}: the last {len(history)} runs{of} ({REMOVE} removes them)")
    print(history_table(history, empty=f"no run{of} kept yet"))
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _number(text: str) -> int:
    try:
        return int(text.removeprefix("#"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run number (3 or #3)") from None

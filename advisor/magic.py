"""`%load_ext advisor`, then `%advisor [URI] [--endpoint-url URL] [--profile NAME] [--demo]` for
the wizard, `%advisor diagnose LOADER (--step STEP | --step-time S | --consumer-rate R)
[--uri URI ...]` to measure a loader of the notebook (names of the notebook's variables),
`%advisor cache [--remove NAME]` for the home cache, or `%advisor history [--dataset URI]
[--compare A B]` for the runs kept across sessions (trials, comparisons, watched epochs)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from typing import Any

from advisor.core.extras import require_extra

# the demo's data sets (advisor.demo.datasets.LAYOUTS: not imported for a help text)
DEMO_LAYOUTS = ("small-images", "shards", "large")
EPILOG = """also:
  %advisor diagnose LOADER (--step STEP | --step-time S | --consumer-rate R) [--uri URI]
                        run a loader of this notebook in a training loop: is it keeping the
                        training waiting? with --uri, the recommended loader beside it
                        (%advisor diagnose --help)
  %advisor cache [--remove NAME | --remove-all]
                        what ~/.cache/loader-advisor holds (local copies, caches, saved
                        listings, the demo's data), with sizes; --remove frees it
  %advisor history [--dataset URI] [--last N] [--compare A B]
                        the runs kept across sessions (trials and their answers, comparisons,
                        watched epochs), side by side; two of them compared with their spreads"""
# the wizard `%advisor` showed last in this kernel (`%advisor history` reads its session)
_shown: list[Any] = []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="%advisor", description="Show the Loader Advisor wizard, prefilled.", add_help=False,
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("uri", nargs="?", default="", help="s3://bucket/prefix/ or a folder")
    parser.add_argument("--endpoint-url", default="", help="a custom S3 endpoint")
    parser.add_argument("--profile", default="", help="an AWS profile name")
    parser.add_argument(
        "--demo",
        nargs="?",
        const="small-images",
        default=None,
        choices=DEMO_LAYOUTS,
        metavar="LAYOUT",
        help="start the local demo endpoint and profile one of its data sets: "
        f"{', '.join(DEMO_LAYOUTS)} (default {DEMO_LAYOUTS[0]})",
    )
    return parser


def _diagnose_parser() -> argparse.ArgumentParser:
    from advisor.cli.diagnose import add_arguments

    parser = argparse.ArgumentParser(
        prog="%advisor diagnose", add_help=False,
        description="Run a loader of this notebook in a training loop: is it keeping the "
        "training waiting? With --uri, the recommended loader beside it.",
    )  # fmt: skip
    parser.add_argument("loader", metavar="LOADER", help="a variable: your DataLoader (or any "
                        "iterable of batches, or a function that makes one)")  # fmt: skip
    add_arguments(parser, step_help="a variable: your step, a function called with each batch")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    return parser


def _parsed(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace | None:
    """The magic's arguments, or None once the help or argparse's usage error is printed (a
    magic must not exit the kernel)."""
    if "-h" in words or "--help" in words:
        print(parser.format_help())
        return None
    try:
        return parser.parse_args(words)
    except SystemExit:  # argparse already printed the usage and the problem
        return None


def _diagnose(words: list[str], namespace: dict[str, Any]) -> None:
    from advisor.cli.diagnose import execute

    parser = _diagnose_parser()
    args = _parsed(parser, words)
    if args is None:
        return
    missing = [n for n in (args.loader, args.step) if n is not None and n not in namespace]
    if missing:
        print(f"%advisor diagnose: no variable named {missing[0]!r} in this notebook")
        return
    step = namespace[args.step] if args.step else None
    # progress and errors as the notebook's plain output: its stderr is a pink box per line
    with contextlib.redirect_stderr(sys.stdout):
        execute(namespace[args.loader], step, args)


def _cache(words: list[str]) -> None:
    from advisor.core import homecache

    parser = argparse.ArgumentParser(prog="%advisor cache", add_help=False,
                                     description="The home cache, listed and freed.")  # fmt: skip
    homecache.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = _parsed(parser, words)
    if args is None:
        return
    homecache.run(args)


def _history(words: list[str]) -> None:
    """The runs kept across sessions (`python -m advisor history`); where the history cannot
    be read, the runs of the wizard shown last, kept in its memory."""
    from advisor.cli import history as cli
    from advisor.report.history import history_table

    parser = argparse.ArgumentParser(prog="%advisor history", add_help=False,
                                     description="The runs kept across sessions.")  # fmt: skip
    cli.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = _parsed(parser, words)
    if args is None:
        return
    with contextlib.redirect_stderr(sys.stdout):  # the error as plain output, not a pink box
        failed = cli.run(args) == 1
    if failed and _shown:
        print("the runs of the wizard shown last, in its memory:")
        print(history_table(_shown[0].controller.session.history()))


def advisor_magic(line: str) -> None:
    """Show the wizard, `diagnose` a loader, list the home `cache` or the wizard's `history`;
    arguments as on the command line (`%advisor --help` lists them)."""
    parser = _parser()
    try:
        words = shlex.split(line)
    except ValueError as exc:
        print(f"%advisor: {exc}")
        return
    if words[:1] == ["diagnose"]:
        from IPython import get_ipython

        shell = get_ipython()
        _diagnose(words[1:], shell.user_ns if shell is not None else {})
        return
    if words[:1] == ["cache"]:
        _cache(words[1:])
        return
    if words[:1] == ["history"]:
        _history(words[1:])
        return
    args = _parsed(parser, words)
    if args is None:
        return
    from advisor.wizard import show

    wizard = show(args.uri, endpoint_url=args.endpoint_url, aws_profile=args.profile)
    _shown[:] = [wizard]
    if args.demo:
        wizard.controller.use_demo(args.demo)


def load_ipython_extension(ipython: Any) -> None:
    require_extra("wizard")  # fail at `%load_ext`, naming the install command, not at `%advisor`
    ipython.register_magic_function(advisor_magic, magic_kind="line", magic_name="advisor")

"""`%load_ext advisor`, then `%advisor [URI] [--endpoint-url URL] [--profile NAME] [--demo]`."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from advisor.core.extras import require_extra


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="%advisor", description="Show the Loader Advisor wizard, prefilled.", add_help=False
    )
    parser.add_argument("uri", nargs="?", default="", help="s3://bucket/prefix/ or a folder")
    parser.add_argument("--endpoint-url", default="", help="a custom S3 endpoint")
    parser.add_argument("--profile", default="", help="an AWS profile name")
    parser.add_argument(
        "--demo",
        nargs="?",
        const="small-images",
        default=None,
        metavar="LAYOUT",
        help="start the local demo endpoint and profile one of its data sets",
    )
    return parser


def advisor_magic(line: str) -> None:
    """Show the wizard; arguments as on the command line (`%advisor --help` lists them)."""
    parser = _parser()
    try:
        words = shlex.split(line)
    except ValueError as exc:
        print(f"%advisor: {exc}")
        return
    if "-h" in words or "--help" in words:
        print(parser.format_help())
        return
    try:
        args = parser.parse_args(words)
    except SystemExit:  # argparse already printed the usage and the problem
        return
    from advisor.wizard import show

    wizard = show(args.uri, endpoint_url=args.endpoint_url, aws_profile=args.profile)
    if args.demo:
        wizard.controller.use_demo(args.demo)


def load_ipython_extension(ipython: Any) -> None:
    require_extra("wizard")  # fail at `%load_ext`, naming the install command, not at `%advisor`
    ipython.register_magic_function(advisor_magic, magic_kind="line", magic_name="advisor")

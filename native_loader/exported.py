"""What `python <exported module>.py` does: read 3 batches with the module's CONFIG and print
their time and the loader's stats, or with `--prepare` make its local copy; an error is one line,
not a traceback, and for the demo's data it says how to serve the demo again.

    if __name__ == "__main__":
        sys.exit(main(CONFIG, sys.argv[1:], demo_serve=DEMO_SERVE, demo_keys=DEMO_KEYS))
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from native_loader.copy_offline import answers
from native_loader.loader import from_config, loader_stats, prepare_from_config
from native_loader.local_copy import last_copy


def main(
    config: Mapping[str, Any],
    argv: Sequence[str],
    demo_serve: str | None = None,
    demo_keys: str | None = None,
) -> int:
    """Run the exported loader as its module's command line does; the exit status.
    `demo_serve` and `demo_keys`: the command that serves the demo's data again and where its
    keys go (None: not the demo's data). The demo's data, once its endpoint is gone, is read
    from a complete local copy where there is one, saying so."""
    offline = demo_serve is not None
    try:
        if "--prepare" in argv:
            wall = time.time()
            folder = prepare_from_config(config, copy_if_unreachable=offline)
            print(copied(folder, since=wall) if folder else _NOTHING_TO_PREPARE)
            return 0
        started = time.monotonic()
        # Each process adds its samples to the shared counts every few hundred and when its
        # pass ends: the pass is ended before the counts are read (its workers stopped, which
        # a persistent loader would keep), so they hold what was read (the workers' read-ahead
        # included).
        loader = from_config(config, persistent_workers=False, copy_if_unreachable=offline)
        batches = itertools.islice(iter(loader), 3)
        read, seconds = sum(1 for _ in batches), time.monotonic() - started
        del batches  # its iterator's last reference: the pass ends (its workers stop)
        print(f"read {read} batches in {seconds:.2f} s")
        print(loader_stats(loader))
        return 0
    except Exception as exc:  # one line, not a traceback: what is wrong and what to do
        print(f"error: {one_line(exc, config, demo_serve, demo_keys)}", file=sys.stderr)
        return 1


_NOTHING_TO_PREPARE = "nothing to prepare: this loader reads the data where it is"


def copied(folder: str, since: float | None = None) -> str:
    """The copy's folder, its size, and its last fetch as measured (`_last_copy.json`); a copy
    this run (started at `since`, Unix time) fetched nothing into is "already local"."""
    report = last_copy(folder)
    if report is None:
        return f"{folder}: already local" if since is not None else folder
    line = f"{folder}: {report.objects:,} objects, {report.bytes / 2**20:,.1f} MiB"
    if since is not None and report.finished < since:
        line += ", already local (nothing fetched now)"
    if report.copied_bytes:
        line += (
            f"; its last copy fetched {report.copied_bytes / 2**20:,.1f} MiB in "
            f"{report.seconds:.1f} s ({report.bytes_per_s / 2**20:,.1f} MiB/s)"
        )
    return line


def one_line(
    exc: BaseException,
    config: Mapping[str, Any],
    demo_serve: str | None = None,
    demo_keys: str | None = None,
) -> str:
    """What went wrong, in one line; for the demo's data, its keys (`demo_keys`) and how to
    serve it again."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    endpoint = config.get("endpoint_url")
    gone = demo_serve and isinstance(exc, (ConnectionError, PermissionError))
    keys = f"give it {demo_keys}" if demo_keys else "give its keys, as this file's docstring says"
    if gone and not answers(endpoint):
        copy = " (no complete local copy to read instead)" if config.get("local_copy_dir") else ""
        return (
            f"cannot reach the demo endpoint {endpoint}{copy}: it ended with the kernel that "
            f"started it; serve it again with `{demo_serve}` and {keys}"
        )
    if demo_keys and isinstance(exc, PermissionError):
        return f"the demo endpoint wants its keys ({text}): {keys}"
    return f"{type(exc).__name__}: {text}"

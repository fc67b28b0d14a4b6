"""One S3 client per process: read a list of objects for a bounded time and report what it cost.

    python -m bench.clients <client> --json --spec spec.json

The spec (JSON, written by `bench.reader_bench`) names the endpoint, whether requests are signed,
the bucket, the keys with their sizes, the client's knob (`concurrency`) and the time bounds. The
client prints one JSON object on stdout: objects and bytes read in the timed phase, wall seconds,
CPU seconds (user + sys of this process, all threads, timed phase only; for `curl` and `wrk` the
whole tool process, from `os.wait4`) and peak RSS (VmHWM of the process, whole lifetime; for
`curl` and `wrk` the tool's, sampled every 20 ms).

Every client gets the whole object into memory (a bytes-like object of the object's size) except
`curl` and `wrk`, which discard bodies and are the ceiling. Each run has an untimed warm-up (opens
connections, loads lazy modules) and then a timed phase that cycles over the keys until
`seconds` have passed or `max_objects` were handed out, whichever comes first.

This module names the clients and runs one; they live by kind in `bench.native_clients`,
`bench.peer_clients` and `bench.tool_clients`, a run's terms and `measure` in `bench.client_run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bench.client_run import Maker, Measurement, Spec, measure
from bench.native_clients import make_native, make_native_stream, make_native_uri
from bench.peer_clients import make_awscrt, make_boto3, make_open, make_s3fs, make_s3torch
from bench.tool_clients import run_curl, run_wrk

PYTHON_CLIENTS: dict[str, Maker] = {
    "native": make_native,
    "native-uri": make_native_uri,
    "native-stream": make_native_stream,
    "open": make_open,
    "boto3": make_boto3,
    "s3fs": make_s3fs,
    "s3torchconnector": make_s3torch,
    "awscrt": make_awscrt,
}
TOOL_CLIENTS: dict[str, Callable[[Spec], Measurement]] = {"curl": run_curl, "wrk": run_wrk}
CLIENTS = sorted([*PYTHON_CLIENTS, *TOOL_CLIENTS])


def run(name: str, spec: Spec) -> Measurement:
    if name in TOOL_CLIENTS:
        return TOOL_CLIENTS[name](spec)
    return measure(name, spec, PYTHON_CLIENTS[name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clients", description=__doc__)
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--spec", required=True, type=Path, help="JSON file with a Spec")
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    args = parser.parse_args(argv)
    spec = Spec(**json.loads(args.spec.read_text()))
    result = run(args.client, spec)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

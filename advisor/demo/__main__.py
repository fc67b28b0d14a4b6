"""`python -m advisor.demo serve`: a local S3 endpoint with the demo datasets, until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from advisor.core.bounds import Range, arg_type, range_of
from advisor.demo.datasets import DEMO_BUCKET, DemoSpec, upload
from advisor.demo.server import S3Server, ServerError, check_port_free


def _positive(kind: type[float] | type[int]):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float | int:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m advisor.demo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start SeaweedFS on 127.0.0.1 with the demo datasets")
    serve.add_argument(
        "--port", type=arg_type(Range(1, 65535, int), "--port"), default=None,
        help="the port clients connect to, with the emulated network when --latency-ms or "
        "--bandwidth-mbps is given (default: a free one)",
    )  # fmt: skip
    serve.add_argument("--bucket", default=DEMO_BUCKET, help="bucket for the demo datasets")
    serve.add_argument(
        "--no-data", action="store_true",
        help="start an empty server at once: no bucket, no demo datasets to generate",
    )  # fmt: skip
    for name in ("images", "shard_mb", "large_files", "large_mb"):
        flag, bound = "--" + name.replace("_", "-"), range_of(DemoSpec, name)
        serve.add_argument(flag, type=arg_type(bound, flag), default=getattr(DemoSpec, name))
    serve.add_argument(
        "--latency-ms", type=_positive(float), default=0.0,
        help="added before the first byte of every response (real S3: tens of ms)",
    )  # fmt: skip
    serve.add_argument(
        "--bandwidth-mbps", type=_positive(float), default=0.0,
        help="per-connection cap in megabytes/s (real S3: about 90); 0 = unlimited",
    )  # fmt: skip
    serve.add_argument(
        "--get-limit", type=_positive(float), default=0.0,
        help="object GETs/HEADs per second let through under --limit-prefix; the rest get 503 "
        "SlowDown (real S3: about 5,500 per prefix); 0 = no limit",
    )  # fmt: skip
    serve.add_argument(
        "--limit-prefix", default=None,
        help="bucket/prefix/ that --get-limit applies to (default: the demo bucket, all of it)",
    )  # fmt: skip
    return parser


def serve(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    limit_prefix = args.limit_prefix or f"{args.bucket}/"
    spec = DemoSpec(
        images=args.images, shard_mb=args.shard_mb, large_files=args.large_files,
        large_mb=args.large_mb,
    )  # fmt: skip
    emulate = bool(args.latency_ms or args.bandwidth_mbps or args.get_limit)
    if args.port is not None:
        check_port_free(args.port)  # before minutes of data generation, whoever binds it
    # --port names what clients connect to: the emulating proxy when there is one, so that
    # nobody who asked for latency gets a direct connection without it.
    with S3Server(port=None if emulate else args.port) as endpoint:
        url = endpoint.url
        proxy = None
        if emulate:
            from advisor.demo.proxy import NetworkProfile, Proxy, RateLimit

            network = NetworkProfile(latency_ms=args.latency_ms, bandwidth_mbps=args.bandwidth_mbps)
            limits = [RateLimit(limit_prefix, args.get_limit)] if args.get_limit else []
            proxy = Proxy(endpoint.url, network=network, port=args.port, rate_limits=limits)
            proxy.start()
            url = proxy.url
        try:
            if not args.no_data:
                print(f"generating demo datasets into s3://{args.bucket}/ ...", flush=True)
                for layout, uri in upload(endpoint, args.bucket, spec).items():
                    print(f"  {layout:13s} {uri}")
            creds = endpoint.credentials
            print(f"S3 endpoint:  {url}")
            if proxy is not None:
                print(f"  (emulating {args.latency_ms:g} ms first-byte latency, "
                      f"{args.bandwidth_mbps or 'unlimited'} MB/s per connection)")  # fmt: skip
                if args.get_limit:
                    print(f"  (503 SlowDown above {args.get_limit:g} GET/s on {limit_prefix})")
                print(f"direct:       {endpoint.url}  (the same server, no emulation)")
            print(f"access key:   {creds.access_key}")
            if creds.is_dummy:
                print(
                    f"secret key:   {creds.secret_key}  (dummy credentials for this local server)"
                )
            else:
                print("secret key:   the one in AWS_SECRET_ACCESS_KEY")
            print(f"region:       {endpoint.region}")
            print("Ctrl-C stops the server and deletes its data.", flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            if proxy is not None:
                proxy.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return serve(args)
    except (ServerError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

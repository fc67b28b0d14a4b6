"""``python -m bench``: run every registered benchmark; ``python -m bench NAME [args]``: one.

python -m bench                 all benchmarks, full size
python -m bench --quick         all benchmarks, quick mode (each passes --quick on)
python -m bench reader --quick  one benchmark with its own options (see --help)
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark: `module` exposes ``main(argv: list[str]) -> int``."""

    name: str
    module: str
    description: str


# The registry. To add a benchmark, add a module with main(argv) and one line here.
BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "reader", "bench.reader_bench", "native_loader vs boto3, s3fs, s3torchconnector, ..."
    ),
    Benchmark("advisor", "bench.advisor_matrix", "recommended num_workers vs an exhaustive sweep"),
    Benchmark("gpu", "bench.gpu", "pinned vs pageable copies and the exported loader on a GPU"),
    Benchmark("reshard", "bench.reshard_bench", "advisor reshard vs boto3+tarfile scripts"),
    Benchmark(
        "advisor-check", "bench.advisor_check", "the exported loader's sweep, unseen scenarios"
    ),
    Benchmark(
        "plan-check", "bench.plan_check", "a plan for the whole machine from a share's trial"
    ),
    Benchmark("e2e", "bench.e2e", "the exported loader vs the loaders people write today"),
    Benchmark("e2e-large", "bench.e2e_large", "large objects streamed: 1 process vs several"),
    Benchmark("e2e-shards", "bench.e2e_shards", "150 MB tar shards vs small objects: 1st batch"),
    Benchmark("handover", "bench.handover", "DataLoader workers: batch hand-over, first full gc"),
    Benchmark("demo-start", "bench.demo_start", "%advisor --demo in fresh kernels: the 2nd start"),
    Benchmark("throttle", "bench.throttle", "emulated ranks vs a prefix's 503 SlowDown limit"),
    Benchmark("watch", "bench.watch_overhead", "what advisor.watch adds to each training step"),
    Benchmark("watch-check", "bench.watch_check", "advisor.watch on loops with a known cause"),
    Benchmark("scale", "bench.scale", "1M single objects: listing, first batch, index memory"),
)


def _usage() -> str:
    lines = [__doc__ or "", "benchmarks:"]
    lines += [f"  {b.name:<10} {b.description} ({b.module})" for b in BENCHMARKS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(_usage())
        return 0
    by_name = {b.name: b for b in BENCHMARKS}
    if args and not args[0].startswith("-"):
        if args[0] not in by_name:
            print(f"unknown benchmark {args[0]!r}\n\n{_usage()}", file=sys.stderr)
            return 2
        selected, rest = [by_name[args[0]]], args[1:]
    else:
        selected, rest = list(BENCHMARKS), args
    status = 0
    for bench in selected:
        module = importlib.import_module(bench.module)
        status = module.main(rest) or status
    return status


if __name__ == "__main__":
    sys.exit(main())

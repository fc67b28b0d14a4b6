"""Large objects streamed: does one process read as fast as several, in bounded memory?

    python -m bench e2e-large [--quick] [--out bench/results/e2e_large.json]

One SeaweedFS behind the project's latency proxy at 0 ms and at 20 ms to first byte (20 ms also
caps each connection at 90 MB/s, as S3 does). For each object size (64 x 8 MiB, 8 x 64 MiB,
2 x 1 GiB) and latency, N reader processes (1, 2, 4; at most one per object) split the same
objects between them and stream each one
(`S3Reader.open_many`, default `ReaderConfig`: 8 MiB parts, 128 MiB read-ahead) with a consumer
that costs no CPU (it takes each chunk and drops it). Every run starts fresh processes, released
together at one instant; repetitions are interleaved. Reported per (latency, size, processes):
MB/s over the run (total bytes / first start to last end), the first byte (the slowest
process's wait for the first chunk of its first object, which no read-ahead hides), the longest
wait for any object's first chunk after the previous one ended, and the largest per-process
peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import own_peak_rss_mib

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "e2e_large.json"
BUCKET = "large"
MIB = 2**20
S3_BANDWIDTH_MBPS = 90.0  # per connection, behind the 20 ms proxy
RUN_TIMEOUT_S = 180.0
START_DELAY_S = 1.5  # processes import, then wait for the common start instant


@dataclass(frozen=True)
class Objects:
    size: int
    count: int

    @property
    def keys(self) -> list[str]:
        return [f"{self.size // MIB}m/obj-{i:03d}" for i in range(self.count)]


def plan(quick: bool) -> tuple[list[Objects], tuple[int, ...], int]:
    """(object sets, process counts, repetitions). The counts run up to the objects in a set
    (two 1 GiB objects: 1 and 2 processes)."""
    if quick:
        return [Objects(8 * MIB, 32), Objects(256 * MIB, 2)], (1, 2), 1
    sets = [Objects(8 * MIB, 64), Objects(64 * MIB, 8), Objects(1024 * MIB, 2)]
    return sets, (1, 2, 4), 3


def upload(client: Any, sets: list[Objects]) -> None:
    client.create_bucket(Bucket=BUCKET)
    for objects in sets:
        block = os.urandom(MIB)
        body = block * (objects.size // MIB)
        for key in objects.keys:
            client.put_object(Bucket=BUCKET, Key=key, Body=body)


# --- one reader process -------------------------------------------------------------------------


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Stream this process's share of the objects; first-chunk times and bytes."""
    from native_loader import Credentials, ObjectInfo, ReaderConfig, S3Reader

    config = ReaderConfig(endpoint_url=spec["endpoint"], region="us-east-1")
    reader = S3Reader(config, credentials=Credentials(spec["access_key"], spec["secret_key"]))
    keys = spec["keys"][spec["index"] :: spec["count"]]
    infos = [ObjectInfo(f"s3://{BUCKET}/{k}", k, spec["size"], "") for k in keys]
    delay = spec["start_at"] - time.time()
    if delay > 0:
        time.sleep(delay)
    start = time.time()
    first_chunk: list[float] = []
    nbytes = 0
    opened = time.perf_counter()
    for stream in reader.open_many(infos):
        got_first = False
        for chunk in stream.chunks():
            if not got_first:
                first_chunk.append(time.perf_counter() - opened)
                got_first = True
            nbytes += len(chunk)
        opened = time.perf_counter()
    end = time.time()
    reader.close()
    return {
        "start": start,
        "end": end,
        "bytes": nbytes,
        "first_chunk_s": first_chunk,
        "peak_rss_mb": own_peak_rss_mib(),
    }


# --- the orchestrator ---------------------------------------------------------------------------


def run(endpoint: str, creds: Any, objects: Objects, processes: int) -> dict[str, Any]:
    start_at = time.time() + START_DELAY_S
    procs = []
    for index in range(processes):
        spec = {
            "endpoint": endpoint,
            "access_key": creds.access_key,
            "secret_key": creds.secret_key,
            "keys": objects.keys,
            "size": objects.size,
            "index": index,
            "count": processes,
            "start_at": start_at,
        }
        cmd = [sys.executable, "-m", "bench.e2e_large", "--child", json.dumps(spec)]
        procs.append(subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"reader process failed ({proc.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    firsts = [t for r in results for t in r["first_chunk_s"]]
    return {
        "mb_per_s": sum(r["bytes"] for r in results) / 1e6 / wall,
        # the first object of each process: its wait is not hidden by the read-ahead
        "first_byte_s": max(r["first_chunk_s"][0] for r in results if r["first_chunk_s"]),
        "first_chunk_median_s": statistics.median(firsts),
        "first_chunk_max_s": max(firsts),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        "bytes": sum(r["bytes"] for r in results),
    }


def report(rows: list[dict[str, Any]], counts: tuple[int, ...]) -> str:
    from advisor.measure.loop.results import Spread  # not at the top: the child imports this

    lines = [
        "| latency | object | processes | MB/s median (range) | 1 process / best | "
        "first byte s (range) | any first chunk, max s | peak RSS MB per process (range) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[int, int], dict[int, list[dict[str, Any]]]] = {}
    for row in rows:
        groups.setdefault((row["latency_ms"], row["size"]), {}).setdefault(
            row["processes"], []
        ).append(row)
    for (latency, size), by_count in groups.items():
        medians = {
            n: statistics.median(r["mb_per_s"] for r in runs) for n, runs in by_count.items()
        }
        best = max(medians.values())
        for n in counts:
            runs = by_count.get(n, [])
            if not runs:
                continue
            share = f"{medians[n] / best:.0%}" if n == 1 else ""
            lines.append(
                f"| {latency} ms | {size // MIB} MiB | {n} | "
                f"{Spread.over([r['mb_per_s'] for r in runs]).show('{:,.0f}')} | {share} | "
                f"{Spread.over([r.get('first_byte_s', math.nan) for r in runs]).show('{:.3f}')} | "
                f"{max(r['first_chunk_max_s'] for r in runs):.3f} | "
                f"{Spread.over([r['peak_rss_mb'] for r in runs]).show('{:,.0f}')} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench e2e-large",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="two sizes, 1 and 4 processes, once")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    from advisor.demo.server import S3Server
    from bench.netem import proxy_process, raise_priority
    from bench.record import Run

    sets, counts, repeats = plan(args.quick)
    command = "python -m bench e2e-large" + (" --quick" if args.quick else "")
    run_record = Run.begin(command)
    os.environ.setdefault("GOMAXPROCS", "1")  # SeaweedFS: see bench.advisor_matrix
    rows: list[dict[str, Any]] = []
    server = S3Server()
    with server as endpoint, contextlib.ExitStack() as stack:
        if server.pid is not None:
            raise_priority(server.pid)
        t0 = time.monotonic()
        upload(endpoint.boto3_client(), sets)
        urls = {0: stack.enter_context(proxy_process(endpoint.url, 0.0))}
        urls[20] = stack.enter_context(proxy_process(endpoint.url, 20.0, S3_BANDWIDTH_MBPS))
        print(f"# data and endpoints ready in {time.monotonic() - t0:.0f} s", flush=True)
        for latency, url in urls.items():
            for objects in sets:
                for rep in range(repeats):
                    for n in (c for c in counts if c <= objects.count):
                        result = run(url, endpoint.credentials, objects, n)
                        row = {
                            "latency_ms": latency,
                            "size": objects.size,
                            "processes": n,
                            "rep": rep,
                            **result,
                        }
                        rows.append(row)
                        print(
                            f"  {latency:>2} ms {objects.size // MIB:>5} MiB x{n}: "
                            f"{result['mb_per_s']:7,.0f} MB/s  first byte "
                            f"{result['first_byte_s']:.3f} s (any chunk max "
                            f"{result['first_chunk_max_s']:.3f})  RSS "
                            f"{result['peak_rss_mb']:5,.0f} MB",
                            flush=True,
                        )
    table = report(rows, counts)
    body = {"sets": [asdict(s) for s in sets], "rows": rows}
    record = run_record.write(args.out, body, markdown=table)
    print(f"\n{record.headline()}\n\n{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

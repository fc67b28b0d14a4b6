"""``python -m bench reshard``: `advisor reshard` against the scripts users write today, and the
DataLoader on the small objects against the DataLoader on the shards.

    python -m bench reshard [--quick] [--objects 2000] [--repeats 3] [--out PATH]

Everything runs on the local SeaweedFS behind the project's latency proxy (20 ms before every
response's first byte, in a process of its own: `bench.netem`). The source is `--objects`
random 20-100 KB objects in 10 class folders. Compared, each timed end to end (listing, reads,
tar building, shard writes, 16 MB shards):

* script-1: boto3 ``get_object`` per file into webdataset-style tars with ``tarfile``, one
  thread (on the first `--script-objects` keys, to bound its run time; its rate is per object);
* script-16: the same with a 16-thread pool;
* advisor: `advisor.reshard.reshard`, one process, default settings.

Then the DataLoader rate, as the advisor's trial measures it
(`advisor.measure.trial.sweep.measure_loader`, 2 workers, batch 32), on the source objects and on
the shards. Every figure is the median of `--repeats` runs with its min-max.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import functools
import io
import random
import statistics
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.netem import REPO, proxy_process
from bench.record import begin

RESULTS = REPO / "bench" / "results" / "reshard.json"
LATENCY_MS = 20.0
SHARD_BYTES = 16 * 10**6
BUCKET = "reshard-bench"


@dataclass(frozen=True)
class Rate:
    """Median and spread of repeated measurements (objects/s or samples/s, and MB/s)."""

    name: str
    objects: int
    per_s: float
    per_s_min: float
    per_s_max: float
    mb_per_s: float


def _rate(name: str, objects: int, runs: list[tuple[float, float]]) -> Rate:
    per_s = [r for r, _ in runs]
    return Rate(
        name,
        objects,
        round(statistics.median(per_s), 1),
        round(min(per_s), 1),
        round(max(per_s), 1),
        round(statistics.median(mb for _, mb in runs), 2),
    )


def _identity(item: Any) -> Any:
    return item


def make_source(client: Any, count: int, threads: int = 16) -> int:
    rng = random.Random(0)
    objects = {
        f"src/class_{i % 10}/img_{i:06d}.jpg": rng.randbytes(rng.randint(20_000, 100_000))
        for i in range(count)
    }
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda kv: client.put_object(Bucket=BUCKET, Key=kv[0], Body=kv[1]),
                      objects.items()))  # fmt: skip
    return sum(len(v) for v in objects.values())


def script_reshard(client: Any, prefix: str, dst: str, threads: int, limit: int) -> tuple[int, int]:
    """What users write today: list, get_object per file, tarfile, put_object per shard."""
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    keys = sorted(keys)[:limit]
    random.Random(0).shuffle(keys)

    def fetch(key: str) -> tuple[str, bytes]:
        return key, client.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    shard, total = 0, 0
    buffer = io.BytesIO()
    tar = tarfile.open(fileobj=buffer, mode="w")  # noqa: SIM115 (closed per shard)

    def flush() -> None:
        nonlocal shard, buffer, tar
        tar.close()
        client.put_object(Bucket=BUCKET, Key=f"{dst}shard-{shard:06d}.tar", Body=buffer.getvalue())
        shard += 1
        buffer = io.BytesIO()
        tar = tarfile.open(fileobj=buffer, mode="w")  # noqa: SIM115

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = map(fetch, keys) if threads == 1 else pool.map(fetch, keys)
        for key, data in results:
            info = tarfile.TarInfo(key[len(prefix) :])
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            total += len(data)
            if buffer.tell() >= SHARD_BYTES:
                flush()
    flush()
    return len(keys), total


def _client(url: str, region: str, creds: Any, pool: int) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=url, region_name=region,
        aws_access_key_id=creds.access_key, aws_secret_access_key=creds.secret_key,
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=pool),
    )  # fmt: skip


def _advisor(
    source: str, dst: str, url: str, creds: Any, objects: int, size: int
) -> tuple[int, int]:
    from advisor.reshard import ReshardConfig, reshard

    result = reshard(source, dst, ReshardConfig(shard_size=SHARD_BYTES), endpoint_url=url,
                     credentials=creds)  # fmt: skip
    assert result.index_url, "the advisor's run did not finish"
    return objects, size


def _timed(run: Callable[[], tuple[int, int]]) -> tuple[float, float]:
    started = time.perf_counter()
    objects, size = run()
    elapsed = time.perf_counter() - started
    return objects / elapsed, size / elapsed / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench reshard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="500 objects, 1 repeat")
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--script-objects", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loader-seconds", type=float, default=8.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    run = begin("reshard", argv)
    if args.quick:
        args.objects, args.script_objects, args.repeats, args.loader_seconds = 500, 200, 1, 4.0
    if not (100 <= args.objects <= 5000 and 1 <= args.repeats <= 5):
        parser.error("--objects must be in [100, 5000] and --repeats in [1, 5]")

    from advisor.demo.server import S3Server
    from advisor.measure.trial.data import TrialData
    from advisor.measure.trial.sweep import measure_loader
    from advisor.reshard import ReshardConfig, dry_run
    from native_loader import Credentials, ReaderConfig, S3Reader

    with tempfile.TemporaryDirectory(prefix="bench-reshard-") as tmp, S3Server(
        data_dir=Path(tmp)
    ) as endpoint, proxy_process(endpoint.url, LATENCY_MS) as proxy_url:  # fmt: skip
        creds = Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)
        direct = endpoint.boto3_client()
        direct.create_bucket(Bucket=BUCKET)
        source_bytes = make_source(direct, args.objects)
        slow = dataclasses.replace(endpoint, url=proxy_url)
        rates: dict[str, list[tuple[float, float]]] = {
            "script-1": [],
            "script-16": [],
            "advisor": [],
        }
        client1 = slow.boto3_client()
        client16 = _client(proxy_url, endpoint.region, creds, 16)
        source = f"s3://{BUCKET}/src/"
        estimate = dry_run(source, f"s3://{BUCKET}/adv-0/", ReshardConfig(shard_size=SHARD_BYTES),
                           endpoint_url=proxy_url, credentials=creds)  # fmt: skip
        for repeat in range(args.repeats):
            run1 = functools.partial(script_reshard, client1, "src/", f"s1-{repeat}/", 1,
                                     args.script_objects)  # fmt: skip
            rates["script-1"].append(_timed(run1))
            run16 = functools.partial(script_reshard, client16, "src/", f"s16-{repeat}/", 16,
                                      args.objects)  # fmt: skip
            rates["script-16"].append(_timed(run16))
            dst = f"s3://{BUCKET}/adv-{repeat}/"
            run_advisor = functools.partial(
                _advisor, source, dst, proxy_url, creds, args.objects, source_bytes
            )
            rates["advisor"].append(_timed(run_advisor))
            print(f"# repeat {repeat + 1}: " + ", ".join(
                f"{k} {v[-1][0]:.0f} objects/s" for k, v in rates.items()), flush=True)  # fmt: skip
        counts = {"script-1": min(args.script_objects, args.objects)}
        results = [_rate(k, counts.get(k, args.objects), v) for k, v in rates.items()]

        config = ReaderConfig(endpoint_url=proxy_url)
        with S3Reader(config, credentials=creds) as reader:
            shards = tuple(
                i for i in reader.list(f"s3://{BUCKET}/adv-0/") if i.key.endswith(".tar")
            )
            small = tuple(reader.list(f"s3://{BUCKET}/src/"))
        loader_runs: dict[str, list[tuple[float, float]]] = {
            "loader-objects": [],
            "loader-shards": [],
        }
        for _ in range(args.repeats):
            for name, objects, fmt in (("loader-objects", small, "binary"),
                                       ("loader-shards", shards, "tar")):  # fmt: skip
                data = TrialData(tuple(objects), config, fmt, _identity, creds)
                point = measure_loader(data, batch_size=32, workers=2, pin=False,
                                       seconds=args.loader_seconds)  # fmt: skip
                loader_runs[name].append((point.samples_per_s, point.mb_per_s))
        results += [_rate(k, args.objects, v) for k, v in loader_runs.items()]

    by = {r.name: r for r in results}
    paired = [a / s for (a, _), (s, _) in zip(rates["advisor"], rates["script-1"], strict=True)]
    loader_paired = [
        sh / ob
        for (sh, _), (ob, _) in zip(
            loader_runs["loader-shards"], loader_runs["loader-objects"], strict=True
        )
    ]
    speedup = by["advisor"].per_s / by["script-1"].per_s
    loader_gain = by["loader-shards"].per_s / by["loader-objects"].per_s
    print(f"\n{'what':<16}{'objects':>8}{'per s (median)':>16}{'min-max':>18}{'MB/s':>9}")
    for r in results:
        spread = f"{r.per_s_min:,.0f}-{r.per_s_max:,.0f}"
        mb = f"{r.mb_per_s:.1f}" if r.mb_per_s else "-"  # the loader's MB/s needs sized samples
        print(f"{r.name:<16}{r.objects:>8}{r.per_s:>16,.1f}{spread:>18}{mb:>9}")
    print(f"\nadvisor / script-1 objects/s: {speedup:.1f}x (target >= 10x); per repeat "
          + ", ".join(f"{x:.1f}x" for x in paired))  # fmt: skip
    print(f"loader on shards / on objects: {loader_gain:.1f}x (target >= 3x); per repeat "
          + ", ".join(f"{x:.1f}x" for x in loader_paired))  # fmt: skip
    print(f"dry-run estimate {estimate.seconds:.1f} s (probed write {estimate.probe_write_mb_per_s}"
          f" MB/s, reads {estimate.probe_objects_per_s:.0f} objects/s) vs median run "
          f"{args.objects / by['advisor'].per_s:.1f} s")  # fmt: skip
    report = {
        "latency_ms": LATENCY_MS,
        "objects": args.objects,
        "source_bytes": source_bytes,
        "repeats": args.repeats,
        "results": [dataclasses.asdict(r) for r in results],
        "advisor_vs_script_1": round(speedup, 2),
        "advisor_vs_script_1_per_repeat": [round(x, 2) for x in paired],
        "loader_shards_vs_objects_per_repeat": [round(x, 2) for x in loader_paired],
        "advisor_vs_script_16": round(by["advisor"].per_s / by["script-16"].per_s, 2),
        "dry_run_estimate": dataclasses.asdict(estimate),
        "dry_run_estimate_vs_median_run": round(
            estimate.seconds / (args.objects / by["advisor"].per_s), 2
        ),
        "loader_shards_vs_objects": round(loader_gain, 2),
    }
    run.write(args.out, report)
    print(f"wrote {args.out}")
    return 0

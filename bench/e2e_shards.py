"""150 MB tar shards against the same samples as small objects: the first batch and the epoch.

    python -m bench e2e-shards [--quick] [--out bench/results/e2e_shards.json]

One SeaweedFS behind the project's latency proxy (20 ms before every response's first byte, 90
MB/s per connection, as S3 gives). The same samples (100 KB of random bytes each) are stored
twice: as small objects (one per sample) and packed into WebDataset tar shards of ~150 MB. Each
loader is `native_loader.S3IterableDataset` in a `DataLoader` (batch 32, a list per batch, no
transform, a consumer that takes batches as fast as they come), in a fresh process per run,
repetitions interleaved:
  small    the small objects (`read_many`, as the exported module reads an image set);
  tar      the shards, `tar_samples=True`: streamed, each sample yielded as its members arrive;
  tar-whole  the shards read whole (`read_many`) and split afterwards: what `tar_samples` did
           before streaming, for comparison.
Reported: seconds to the first batch and samples/s over the epoch (start-up included), median
and range, and the main process's peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import own_peak_rss_mib

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "e2e_shards.json"
BUCKET = "shards"
SAMPLE_BYTES = 100_000
SHARD_BYTES = 150_000_000
S3_BANDWIDTH_MBPS = 90.0
RUN_TIMEOUT_S = 240.0
LOADERS = ("small", "tar", "tar-whole")


def upload(client: Any, shards: int) -> int:
    """`shards` tars of ~SHARD_BYTES and the same samples as small objects; the sample count."""
    client.create_bucket(Bucket=BUCKET)
    per_shard = SHARD_BYTES // (SAMPLE_BYTES + 1024)
    index = 0
    for shard in range(shards):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
            for _ in range(per_shard):
                body = os.urandom(SAMPLE_BYTES)
                key = f"s{index:06d}"
                client.put_object(Bucket=BUCKET, Key=f"small/{key}.bin", Body=body)
                info = tarfile.TarInfo(f"{key}.bin")
                info.size = len(body)
                archive.addfile(info, io.BytesIO(body))
                index += 1
        client.put_object(Bucket=BUCKET, Key=f"tar/shard-{shard:04d}.tar", Body=buffer.getvalue())
    return index


# --- one timed run (its own process) ------------------------------------------------------------


def child(spec: dict[str, Any]) -> dict[str, Any]:
    from torch.utils.data import DataLoader

    from native_loader import Credentials, ReaderConfig, S3IterableDataset
    from native_loader.decoders import collate_list
    from native_loader.tar import iter_samples

    t0 = time.perf_counter()
    config = ReaderConfig(endpoint_url=spec["endpoint"], region="us-east-1")
    creds = Credentials(spec["access_key"], spec["secret_key"])
    loader_name, workers = spec["loader"], spec["workers"]
    prefix = "small/" if loader_name == "small" else "tar/"
    dataset: Any = S3IterableDataset(
        f"s3://{BUCKET}/{prefix}",
        config=config,
        credentials=creds,
        tar_samples=loader_name == "tar",
    )
    if loader_name == "tar-whole":
        dataset = _whole_shards(dataset, iter_samples)
    dataset.uris()
    loader = DataLoader(dataset, batch_size=32, num_workers=workers, collate_fn=collate_list)
    first = 0.0
    samples = 0
    for batch in loader:
        if not first:
            first = time.perf_counter() - t0
        samples += len(batch)
    epoch = time.perf_counter() - t0
    return {
        "first_batch_s": first,
        "epoch_s": epoch,
        "samples": samples,
        "samples_per_s": samples / epoch,
        "peak_rss_mb": own_peak_rss_mib(),
    }


def _whole_shards(dataset: Any, split: Any) -> Any:
    """The shards read whole by `read_many`, then split: the pre-streaming `tar_samples`."""
    import torch.utils.data

    class WholeShards(torch.utils.data.IterableDataset[Any]):
        def uris(self) -> list[str]:
            return list(dataset.uris())

        def __iter__(self) -> Iterator[Any]:
            index, count = dataset.shard()
            for result in dataset.reader.read_many(dataset.uris()[index::count]):
                yield from split(result)

    return WholeShards()


# --- the orchestrator ---------------------------------------------------------------------------


def run(url: str, creds: Any, loader: str, workers: int) -> dict[str, Any]:
    spec = {
        "endpoint": url,
        "access_key": creds.access_key,
        "secret_key": creds.secret_key,
        "loader": loader,
        "workers": workers,
    }
    cmd = [sys.executable, "-m", "bench.e2e_shards", "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"{loader} w{workers} failed: {proc.stderr.strip()[-500:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench e2e-shards",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="one repetition")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        with contextlib.redirect_stdout(sys.stderr):
            result = child(json.loads(args.child))
        print(json.dumps(result))
        return 0
    from advisor.demo.server import S3Server
    from advisor.measure.loop.results import Spread
    from bench.netem import proxy_process, raise_priority
    from bench.record import Run

    repeats = 1 if args.quick else 3
    configs = [(loader, w) for w in (0, 2) for loader in LOADERS]
    command = "python -m bench e2e-shards" + (" --quick" if args.quick else "")
    run_record = Run.begin(command)
    os.environ.setdefault("GOMAXPROCS", "1")  # SeaweedFS: see bench.advisor_matrix
    rows: list[dict[str, Any]] = []
    server = S3Server()
    with server as endpoint, contextlib.ExitStack() as stack:
        if server.pid is not None:
            raise_priority(server.pid)
        t0 = time.monotonic()
        samples = upload(endpoint.boto3_client(), 2)
        url = stack.enter_context(proxy_process(endpoint.url, 20.0, S3_BANDWIDTH_MBPS))
        print(f"# {samples} samples, data ready in {time.monotonic() - t0:.0f} s", flush=True)
        for rep in range(repeats):
            for loader, workers in configs:
                result = run(url, endpoint.credentials, loader, workers)
                rows.append({"loader": loader, "workers": workers, "rep": rep, **result})
                print(
                    f"  {loader:<9} w{workers}: first batch {result['first_batch_s']:6.2f} s  "
                    f"{result['samples_per_s']:7,.0f} samples/s  epoch {result['epoch_s']:5.1f} s"
                    f"  RSS {result['peak_rss_mb']:5,.0f} MB",
                    flush=True,
                )
    lines = [
        "| loader | workers | first batch s | samples/s (epoch) | main process peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for loader, workers in configs:
        runs = [r for r in rows if (r["loader"], r["workers"]) == (loader, workers)]
        lines.append(
            f"| {loader} | {workers} | "
            f"{Spread.over([r['first_batch_s'] for r in runs]).show('{:.2f}')} | "
            f"{Spread.over([r['samples_per_s'] for r in runs]).show('{:,.0f}')} | "
            f"{Spread.over([r['peak_rss_mb'] for r in runs]).show('{:,.0f}')} |"
        )
    table = f"{samples} samples\n\n" + "\n".join(lines)
    record = run_record.write(args.out, {"samples": samples, "rows": rows}, markdown=table)
    print(f"\n{record.headline()}\n\n{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

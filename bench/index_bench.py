"""A dataset's listing, before and after the compact index: on a SeaweedFS-served set of a few
thousand 1 KiB keys, the listing's time, the first sample's (from the dataset made as the
exported module makes it, through a DataLoader of 2 forked workers) and samples/s per epoch.

    python bench/index_bench.py --keys 4000 --repeats 5 --tree /tmp/before --tree .

Each `--tree` is a source tree whose ``native_loader`` is measured (a checkout of another
commit, its native module copied beside it); the runs of the trees alternate, and each figure
is the median of `repeats` runs with its min-max. The measurement runs in a child process per
tree and run (``--measure``), importing only torch and that tree's native_loader.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

BUCKET = "index-bench"


def measure(url: str, region: str, uri: str, shuffle: bool, epochs: int) -> dict[str, Any]:
    """One run: the listing alone, then the loader's first sample and epochs."""
    import torch.utils.data

    import native_loader
    from native_loader import Credentials, ReaderConfig, S3Reader
    from native_loader.datasets import S3IterableDataset, resolve_source

    config = ReaderConfig(endpoint_url=url, region=region)
    credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    with S3Reader(config, credentials=credentials) as reader:
        started = time.perf_counter()
        listed = len(resolve_source(uri, reader))
        list_s = time.perf_counter() - started
    started = time.perf_counter()
    dataset = S3IterableDataset(
        uri, config=config, credentials=credentials, transform=bytes, shuffle=shuffle, seed=1
    )
    getattr(dataset, "list_objects", dataset.uris)()  # what the exported module calls
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=32, num_workers=2, collate_fn=list, persistent_workers=True,
        multiprocessing_context="fork", timeout=120,
    )  # fmt: skip
    rates, first_s = [], 0.0
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        samples, epoch_start = 0, time.perf_counter()
        for batch in loader:
            if not first_s:
                first_s = time.perf_counter() - started
            samples += len(batch)
        assert samples == listed, (samples, listed)
        rates.append(samples / (time.perf_counter() - epoch_start))
    return {"module": native_loader.__file__, "list_s": list_s, "first_s": first_s,
            "rates": rates}  # fmt: skip


def _spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    scaled = [v * scale for v in values]
    return (
        f"{statistics.median(scaled):.{digits}f} "
        f"({min(scaled):.{digits}f}-{max(scaled):.{digits}f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[])
    parser.add_argument("--measure", nargs=4, metavar=("URL", "REGION", "URI", "SHUFFLE"))
    args = parser.parse_args(argv)
    if args.measure:
        url, region, uri, shuffle = args.measure
        print(json.dumps(measure(url, region, uri, shuffle == "1", args.epochs)))
        return 0
    from advisor.demo.server import S3Server

    trees = [os.path.abspath(t) for t in args.tree or ["."]]
    with S3Server() as endpoint:
        os.environ["AWS_ACCESS_KEY_ID"] = endpoint.credentials.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = endpoint.credentials.secret_key
        client = endpoint.boto3_client()
        client.create_bucket(Bucket=BUCKET)
        body = b"x" * 1024
        for i in range(args.keys):
            key = f"train/class_{i % 100:04d}/img_{i:08d}.jpg"
            client.put_object(Bucket=BUCKET, Key=key, Body=body)
        uri = f"s3://{BUCKET}/train/"
        for shuffle in ("0", "1"):
            runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
            for _ in range(args.repeats):
                for tree in trees:
                    command = [sys.executable, os.path.abspath(__file__), "--measure",
                               endpoint.url, endpoint.region, uri, shuffle,
                               "--epochs", str(args.epochs)]  # fmt: skip
                    env = {**os.environ, "PYTHONPATH": tree}
                    out = subprocess.run(
                        command, env=env, capture_output=True, text=True, timeout=600, check=True
                    )
                    runs[tree].append(json.loads(out.stdout.strip().splitlines()[-1]))
            for tree, results in runs.items():
                order = "shuffled" if shuffle == "1" else "in order"
                module = results[0]["module"]
                print(f"{order} {tree} ({module}), {args.keys} keys, {args.repeats} runs:")
                print(f"  listing s {_spread([r['list_s'] for r in results])}")
                print(f"  first sample s {_spread([r['first_s'] for r in results])}")
                for epoch in range(args.epochs):
                    rates = [r["rates"][epoch] for r in results]
                    print(f"  epoch {epoch} samples/s {_spread(rates, digits=0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

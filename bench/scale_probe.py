"""One measured process of `python -m bench scale`, printing one JSON line on stdout:

    python -m bench.scale_probe boto3  URI EXPECTED   # a plain boto3 paginator lists every key
    python -m bench.scale_probe native URI EXPECTED   # native_loader's S3Reader.list
    python -m bench.scale_probe loader MODULE EXPECTED --read-s 15 --batch-size 256

The endpoint and the (dummy) credentials come from the environment (`SyntheticS3.env`). A
listing that does not give EXPECTED keys, each once and in order, exits 1 naming what it got.
`loader` imports the exported MODULE as a training script does, calls its
`make_dataloader(num_workers=2, batch_size=...)` and reads: the time to the first batch (the
listing included), the process's resident memory before `make_dataloader`, after it, after the
first batch and after `--read-s` seconds of reading, each worker's private memory then, and the
samples read, with their times. Only public APIs, so that it measures any version of the index.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from testing.synthetic_keyspace import SEPARATOR

MAX_BATCHES = 1_000_000  # the reading loop's bound beside its time


def rss_bytes(pid: int | str = "self") -> int:
    """VmRSS of a process (0 where it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def private_bytes(pid: int) -> int:
    """Private_Clean + Private_Dirty of /proc/PID/smaps_rollup: the memory only this process
    holds (a forked worker's copies of its parent's pages included; 0 where it has gone)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except OSError:
        return 0
    return total


def children(pid: int) -> list[int]:
    """The direct children of a process (its DataLoader workers), from every thread's list."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return sorted(set(found))


def check_keys(keys: Iterable[str], expected: int) -> int:
    """The number of keys, raising where they are not `expected` distinct keys in order."""
    count, last = 0, ""
    for key in keys:
        if key <= last:
            raise SystemExit(f"key {key!r} listed after {last!r}: out of order or listed twice")
        count, last = count + 1, key
    if count != expected:
        raise SystemExit(f"listed {count:,} keys, expected {expected:,}")
    return count


def list_boto3(uri: str, expected: int) -> dict[str, Any]:
    import boto3

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    client = boto3.client("s3")
    started = time.perf_counter()
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    count = check_keys(
        (item["Key"] for page in pages for item in page.get("Contents", ())), expected
    )
    return {"seconds": time.perf_counter() - started, "keys": count}


def list_native(uri: str, expected: int) -> dict[str, Any]:
    from native_loader import S3Reader

    with S3Reader() as reader:
        started = time.perf_counter()
        count = check_keys((info.key for info in reader.list(uri)), expected)
        return {"seconds": time.perf_counter() - started, "keys": count}


def _check_sample(sample: Any) -> None:
    """A sample is a synthetic object's body (`Keyspace.body`): its key, then SEPARATOR,
    repeated; a sample that is not its bytes (raw, decoded as a uint8 tensor) exits 1."""
    data = bytes(sample.numpy()) if hasattr(sample, "numpy") else sample
    if not isinstance(data, bytes) or SEPARATOR not in data:
        raise SystemExit(f"a sample is not a synthetic object's body: {str(data)[:80]}")
    seed = data[: data.index(SEPARATOR) + len(SEPARATOR)]
    if (seed * (len(data) // len(seed) + 1))[: len(data)] != data:
        raise SystemExit(f"a sample is not a synthetic object's body: {data[:80]!r}")


def _import_runtime() -> None:
    """Import torch and every native_loader module before the first memory reading: the
    exported module imports the runtime as it needs it, and the growth after that reading is
    to be the data set's (the reader's threads and connections are in it too, a fixed cost)."""
    import importlib
    import pkgutil

    import torch.utils.data  # noqa: F401

    import native_loader

    for module in pkgutil.iter_modules(native_loader.__path__, "native_loader."):
        importlib.import_module(module.name)


def read_loader(module_path: Path, expected: int, read_s: float, batch_size: int) -> dict[str, Any]:
    _import_runtime()
    spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports native_loader and torch, as a training script does
    me = os.getpid()
    rss_before = rss_bytes()
    started = time.perf_counter()
    loader = module.make_dataloader(num_workers=2, batch_size=batch_size)
    made_s, rss_made = time.perf_counter() - started, rss_bytes()
    batches = iter(loader)
    first = next(batches)
    first_s, rss_first = time.perf_counter() - started, rss_bytes()
    workers = children(me)
    private_first = {str(pid): private_bytes(pid) for pid in workers}
    for sample in list(first)[:8]:
        _check_sample(sample)
    samples, times = [len(first)], [0.0]  # samples read by each time after the first batch
    reading = time.perf_counter()
    for _ in range(MAX_BATCHES):
        if time.perf_counter() - reading >= read_s:
            break
        try:
            batch = next(batches)
        except StopIteration:
            break
        samples.append(samples[-1] + len(batch))
        times.append(time.perf_counter() - reading)
    private_end = {str(pid): private_bytes(pid) for pid in workers}
    out = {
        "keys": expected,
        "dataset_len": _length(loader.dataset),
        "make_dataloader_s": made_s,
        "first_batch_s": first_s,
        "rss_before": rss_before,
        "rss_after_make": rss_made,
        "rss_after_first_batch": rss_first,
        "rss_after_reading": rss_bytes(),
        "read_s": times[-1],
        "samples_read": samples[-1],
        "times": times,
        "samples": samples,
        "workers": len(workers),
        "worker_private_at_first_batch": private_first,
        "worker_private_after_reading": private_end,
    }
    del batches  # the workers exit before this process does
    return out


def _length(dataset: Any) -> int | None:
    try:
        return len(dataset)
    except (TypeError, NotImplementedError):  # an iterable data set may have no length
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_probe", description=__doc__)
    parser.add_argument("mode", choices=("boto3", "native", "loader"))
    parser.add_argument("target", help="s3://bucket/prefix/ (boto3, native) or MODULE (loader)")
    parser.add_argument("expected", type=int, help="the number of keys under the prefix")
    parser.add_argument("--read-s", type=float, default=15.0)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args(argv)
    if args.mode == "boto3":
        out = list_boto3(args.target, args.expected)
    elif args.mode == "native":
        out = list_native(args.target, args.expected)
    else:
        out = read_loader(Path(args.target), args.expected, args.read_s, args.batch_size)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

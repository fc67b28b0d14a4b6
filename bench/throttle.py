"""Ranks in a throttling storm: emulated ranks read through the proxy's S3 rate limit per prefix.

    python -m bench throttle [--layouts 3x2] [--prefixes 1,6] [--per-object 1,20]
                             [--seconds 10] [--repeats 3] [--listing-order] [--quick]
                             [--out bench/results/throttle.json]

Each layout `RxW` is R ranks, each a process given its rank and the world size as torchrun gives
them, with a DataLoader of W workers (`S3IterableDataset` shuffled as the exported loader reads
it, `persistent_workers`, the objects dealt over ranks x workers), all reading 600 samples of
10 KB, as objects of their own or packed N to a WebDataset tar shard, spread evenly over P key
prefixes of the local SeaweedFS through the demo proxy. Per case and repeat, interleaved:

1. calibrate: no limit; the aggregate successful GET/s the ranks reach is their demand D;
2. the proxy limits each prefix to `limit = D / 3` GET/s (`RateLimit`), so on one prefix the
   ranks ask for 3x the limit (on six, half of what the prefixes allow), and they read again
   with the reader's default `adaptive_rate=True`;
3. the same with `adaptive_rate=False` (retries with backoff, no send-rate limiter).

Beside each limited run stands the plan's prediction for it
(`advisor.decide.facts.request_plan`, the arithmetic of COST-6 with the limit given as the
user's figure and the calibration's samples/s as the ranks' rate, which it turns into GETs by
the samples per object): whether the job is throttled and the successful GET/s it holds (the
middle of its range), and the measurement's ratio to it. `--listing-order` reads the prefixes
one after another instead of shuffled.

The proxy counts what reached it (passed and throttled GETs); every sample is checked against
the sha256 of what boto3 wrote. A run's window is from its first successful GET to the common
deadline, so the storm's onset is inside it. Figures: successful GET/s as a share of the limit,
requests per success, the throttling onset (seconds from the first GET to the first 503), and
each rank's share of the samples (min-max). Medians with the range over the repeats.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from advisor.decide.facts.request_plan import StorageLimit, plan_requests
from advisor.demo.proxy import Proxy, RateLimit
from advisor.demo.server import S3Endpoint, S3Server
from bench.record import begin
from bench.throttle_report import Run, summarize, table
from native_loader import Credentials, ReaderConfig, S3IterableDataset
from native_loader.tarwriter import build_tar

RESULTS = Path(__file__).resolve().parent / "results" / "throttle.json"
BUCKET, PREFIX = "throttle-bench", "hot/"
SAMPLES, SAMPLE_BYTES = 600, 10_000  # as objects of one sample each, or packed in tar shards
UNLIMITED = 1e9  # a RateLimit that never throttles, so the calibration is counted the same way
SAMPLE_S = 0.1


@dataclass(frozen=True)
class Layout:
    """R ranks x W DataLoader workers each."""

    ranks: int
    workers: int

    @classmethod
    def parse(cls, text: str) -> Layout:
        ranks, _, workers = text.partition("x")
        layout = cls(int(ranks), int(workers))
        if layout.ranks < 1 or layout.workers < 0:
            raise ValueError(f"{text!r}: a layout is RANKSxWORKERS, e.g. 3x2")
        return layout

    def __str__(self) -> str:
        return f"{self.ranks}x{self.workers}"


def _digest(data: Any) -> str:
    return hashlib.sha256(memoryview(data)).hexdigest()


def _rank(spec: dict[str, Any], rank: int, queue: Any) -> None:
    """One emulated rank: its DataLoader reads until the common deadline."""
    config = ReaderConfig(
        endpoint_url=spec["url"], region="us-east-1", adaptive_rate=spec["adaptive"]
    )
    credentials = Credentials(*spec["credentials"])
    dataset = S3IterableDataset(
        f"s3://{BUCKET}/{spec['root']}",
        config=config,
        credentials=credentials,
        rank=rank,
        world_size=spec["ranks"],
        tar_samples=spec["tar"],
        shuffle=spec["shuffle"],  # the exported loader's order: each pass mixes the prefixes
    )
    workers = spec["workers"]
    loader = DataLoader(
        dataset, batch_size=None, num_workers=workers, persistent_workers=workers > 0
    )
    digests: dict[str, str] = spec["digests"]
    items = wrong = 0
    error = ""
    try:
        while time.monotonic() < spec["deadline"]:
            for item in loader:
                items += 1
                if isinstance(item, dict):  # a tar sample: its one member, named by its key
                    wrong += _digest(item["bin"]) != digests[item["__key__"]]
                else:
                    wrong += _digest(item) != digests[item.uri]
                if time.monotonic() >= spec["deadline"]:
                    break
    except Exception as e:  # a rank that dies is reported, not hidden
        error = f"{type(e).__name__}: {str(e)[:300]}"
    queue.put((rank, items, wrong, error))
    queue.close()
    queue.join_thread()
    # Stop at once: shutting the loader down waits for its workers, which keep reading and
    # would overlap the next run. The workers are this rank's children.
    for worker in multiprocessing.active_children():
        worker.kill()
    os._exit(0)


def _prefix(prefixes: int, per_object: int, j: int) -> str:
    return f"{_root(prefixes, per_object)}p{j}/"


def _root(prefixes: int, per_object: int) -> str:
    return f"{PREFIX}{prefixes}x{per_object}/"


def _upload(endpoint: S3Endpoint, prefixes: int, per_object: int) -> dict[str, str]:
    """SAMPLES samples under PREFIX{prefixes}x{per_object}/, dealt over `prefixes` prefixes: an
    object each, or `per_object` to a WebDataset tar shard; their sha256 by object URI or key."""
    client = endpoint.boto3_client()
    if not any(b["Name"] == BUCKET for b in client.list_buckets()["Buckets"]):
        client.create_bucket(Bucket=BUCKET)
    digests = {}
    data = [os.urandom(SAMPLE_BYTES) for _ in range(SAMPLES)]
    for i in range(0, SAMPLES, per_object):
        key = f"{_prefix(prefixes, per_object, (i // per_object) % prefixes)}{i:05d}"
        if per_object == 1:
            body = data[i]
            digests[f"s3://{BUCKET}/{key}"] = _digest(body)
        else:
            members = [(f"{j:05d}.bin", data[j]) for j in range(i, min(i + per_object, SAMPLES))]
            body = build_tar(members)
            key += ".tar"
            digests.update({name.split(".")[0]: _digest(d) for name, d in members})
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
    return digests


def run_once(
    endpoint: S3Endpoint,
    digests: dict[str, str],
    layout: Layout,
    mode: str,
    limit: float,
    seconds: float,
    prefixes: int = 1,
    shuffle: bool = True,
    per_object: int = 1,
) -> Run:
    rates = [
        RateLimit(f"{BUCKET}/{_prefix(prefixes, per_object, j)}", limit) for j in range(prefixes)
    ]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with Proxy(endpoint.url, rate_limits=rates) as proxy:
        deadline = time.monotonic() + seconds + 3.0  # the ranks' start is not in the window
        spec = {
            "url": proxy.url,
            "credentials": (endpoint.credentials.access_key, endpoint.credentials.secret_key),
            "adaptive": mode != "fixed",
            "ranks": layout.ranks,
            "workers": layout.workers,
            "root": _root(prefixes, per_object),
            "tar": per_object > 1,
            "shuffle": shuffle,
            "digests": digests,
            "deadline": deadline,
        }
        ranks = [context.Process(target=_rank, args=(spec, r, queue)) for r in range(layout.ranks)]
        for process in ranks:
            process.start()
        passed, throttled = proxy.throttle.passed, proxy.throttle.throttled

        def counts() -> tuple[int, int]:
            return sum(passed[r.prefix] for r in rates), sum(throttled[r.prefix] for r in rates)

        first: tuple[float, int, int] | None = None
        onset: float | None = None
        while time.monotonic() < deadline:
            time.sleep(SAMPLE_S)
            now, (ok, no) = time.monotonic(), counts()
            if first is None and ok > 0:
                first = (now - SAMPLE_S / 2, ok, no)
            if first is not None and onset is None and no > 0:
                onset = now - SAMPLE_S / 2 - first[0]
        last = (time.monotonic(), *counts())
        reports = sorted(queue.get(timeout=60) for _ in ranks)
        for process in ranks:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    start = first or last
    window = max(last[0] - start[0], 1e-9)
    ok, no = last[1] - start[1], last[2] - start[2]
    items = [n for _, n, _, _ in reports]
    total = max(sum(items), 1)
    return Run(
        layout=str(layout),
        mode=mode,
        prefixes=prefixes,
        per_object=per_object,
        limit=limit,
        ok_per_s=ok / window,
        share_of_limit=0.0 if limit >= UNLIMITED else ok / window / (limit * prefixes),
        requests_per_success=(ok + no) / max(ok, 1),
        throttled=last[2],
        onset_s=onset,
        rank_share_min=min(items) / total,
        rank_share_max=max(items) / total,
        items=sum(items),
        samples_per_s=sum(items) / window,
        wrong=sum(w for _, _, w, _ in reports),
        errors=[e for *_, e in reports if e],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench throttle", description=__doc__)
    parser.add_argument("--layouts", default="3x2", help="comma-separated RANKSxWORKERS")
    parser.add_argument(
        "--prefixes", default="1", help="comma-separated counts of prefixes the data spreads over"
    )
    parser.add_argument(
        "--per-object",
        default="1",
        help="comma-separated samples per object: 1 (an object each) or N (tar shards of N)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="window of each run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repeat of 5 s")
    parser.add_argument(
        "--listing-order",
        action="store_true",
        help="read in listing order (the prefixes one after another), not shuffled",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    bench_run = begin("throttle", argv)
    if args.quick:
        args.seconds, args.repeats = 5.0, 1
    layouts = [Layout.parse(text) for text in args.layouts.split(",")]
    spreads = [int(text) for text in args.prefixes.split(",")]
    packings = [int(text) for text in args.per_object.split(",")]
    cases = [(lay, p, n) for lay in layouts for p in spreads for n in packings]
    runs: list[Run] = []
    with S3Server() as endpoint:
        digests = {(p, n): _upload(endpoint, p, n) for _, p, n in cases}
        for repeat in range(args.repeats):
            for layout, prefixes, per_object in cases:
                where = (prefixes, not args.listing_order, per_object)
                data = digests[prefixes, per_object]
                calibration = run_once(
                    endpoint, data, layout, "calibrate", UNLIMITED, args.seconds, *where
                )
                demand = calibration.ok_per_s
                limit = max(1.0, round(demand / 3))
                runs.append(calibration)
                # the plan from what the ranks read, in samples: it converts them to GETs
                job = plan_requests(
                    StorageLimit(limit, True, "the emulated limit"), ranks=layout.ranks,
                    samples_per_s_per_rank=calibration.samples_per_s / layout.ranks,
                    samples_per_object=per_object, prefixes=prefixes,
                )  # fmt: skip
                planned = sum(job.served_get_per_s) / 2
                for mode in ("adaptive", "fixed"):
                    run = run_once(endpoint, data, layout, mode, limit, args.seconds, *where)
                    runs.append(
                        replace(run, planned_ok_per_s=planned, planned_throttled=job.throttled)
                    )
                    print(
                        f"repeat {repeat + 1} {layout} over {prefixes} prefixes, {per_object} "
                        f"samples per object, {mode}: limit "
                        f"{limit:.0f} GET/s per prefix (demand {demand:.0f}), "
                        f"{run.share_of_limit:.2f} of it, {run.ok_per_s:.0f} ok GET/s against "
                        f"the plan's {planned:.0f} ({'throttled' if job.throttled else 'under'}"
                        f"), {run.throttled} throttled, {run.requests_per_success:.2f} "
                        f"requests/success, {run.wrong} wrong, errors {run.errors}",
                        file=sys.stderr,
                    )
    rows = summarize(runs)
    print(table(rows))
    out = {
        "samples": SAMPLES,
        "sample_bytes": SAMPLE_BYTES,
        "seconds": args.seconds,
        "summary": rows,
        "runs": [asdict(r) for r in runs],
    }
    bench_run.write(args.out, out, indent=2)
    bad = any(r.wrong or (r.errors and r.mode != "fixed") for r in runs)
    return 1 if bad else 0

"""Ranks in a throttling storm: emulated ranks read one prefix through the proxy's S3 rate limit.

    python -m bench throttle [--layouts 3x2] [--seconds 10] [--repeats 3] [--quick]
                             [--out bench/results/throttle.json]

Each layout `RxW` is R ranks, each a process with a DataLoader of W workers
(`S3IterableDataset`, `persistent_workers`, the objects dealt over ranks x workers), all reading
10 KB objects under one prefix of the local SeaweedFS through the demo proxy. Per layout and
repeat, interleaved:

1. calibrate: no limit; the aggregate successful GET/s the ranks reach is their demand D;
2. the proxy limits the prefix to `limit = D / 3` GET/s (`RateLimit`), so the ranks ask for 3x
   the limit, and they read again with the reader's default `adaptive_rate=True`;
3. the same with `adaptive_rate=False` (retries with backoff, no send-rate limiter).

The proxy counts what reached it (passed and throttled GETs); every item is checked against the
sha256 of what boto3 wrote. A run's window is from its first successful GET to the common
deadline, so the storm's onset is inside it. Figures: successful GET/s as a share of the limit,
requests per success, the throttling onset (seconds from the first GET to the first 503), and
each rank's share of the successes (min-max). Medians with the range over the repeats.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from advisor.demo.proxy import Proxy, RateLimit
from advisor.demo.server import S3Endpoint, S3Server
from native_loader import Credentials, ReaderConfig, S3IterableDataset

RESULTS = Path(__file__).resolve().parent / "results" / "throttle.json"
BUCKET, PREFIX = "throttle-bench", "hot/"
OBJECTS, OBJECT_BYTES = 600, 10_000
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


@dataclass(frozen=True)
class Run:
    """One run of one layout against one limit (GET/s; UNLIMITED for the calibration)."""

    layout: str
    mode: str  # "calibrate", "adaptive" or "fixed"
    limit: float
    ok_per_s: float  # successful GETs per second over the window
    share_of_limit: float  # ok_per_s / limit (0 for the calibration)
    requests_per_success: float
    throttled: int
    onset_s: float | None  # first GET to first 503
    rank_share_min: float  # a rank's share of the items read, the least and the most
    rank_share_max: float
    items: int
    wrong: int
    errors: list[str]


def _digest(data: Any) -> str:
    return hashlib.sha256(memoryview(data)).hexdigest()


def _rank(spec: dict[str, Any], rank: int, queue: Any) -> None:
    """One emulated rank: its DataLoader reads until the common deadline."""
    config = ReaderConfig(
        endpoint_url=spec["url"], region="us-east-1", adaptive_rate=spec["adaptive"]
    )
    credentials = Credentials(*spec["credentials"])
    dataset = S3IterableDataset(
        f"s3://{BUCKET}/{PREFIX}",
        config=config,
        credentials=credentials,
        rank=rank,
        world_size=spec["ranks"],
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


def _upload(endpoint: S3Endpoint) -> dict[str, str]:
    client = endpoint.boto3_client()
    client.create_bucket(Bucket=BUCKET)
    digests = {}
    for i in range(OBJECTS):
        data = os.urandom(OBJECT_BYTES)
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}{i:05d}", Body=data)
        digests[f"s3://{BUCKET}/{PREFIX}{i:05d}"] = _digest(data)
    return digests


def run_once(
    endpoint: S3Endpoint,
    digests: dict[str, str],
    layout: Layout,
    mode: str,
    limit: float,
    seconds: float,
) -> Run:
    rate = RateLimit(f"{BUCKET}/{PREFIX}", limit)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with Proxy(endpoint.url, rate_limits=[rate]) as proxy:
        deadline = time.monotonic() + seconds + 3.0  # the ranks' start is not in the window
        spec = {
            "url": proxy.url,
            "credentials": (endpoint.credentials.access_key, endpoint.credentials.secret_key),
            "adaptive": mode != "fixed",
            "ranks": layout.ranks,
            "workers": layout.workers,
            "digests": digests,
            "deadline": deadline,
        }
        ranks = [context.Process(target=_rank, args=(spec, r, queue)) for r in range(layout.ranks)]
        for process in ranks:
            process.start()
        passed, throttled = proxy.throttle.passed, proxy.throttle.throttled
        first: tuple[float, int, int] | None = None
        onset: float | None = None
        while time.monotonic() < deadline:
            time.sleep(SAMPLE_S)
            now, ok, no = time.monotonic(), passed[rate.prefix], throttled[rate.prefix]
            if first is None and ok > 0:
                first = (now - SAMPLE_S / 2, ok, no)
            if first is not None and onset is None and no > 0:
                onset = now - SAMPLE_S / 2 - first[0]
        last = (time.monotonic(), passed[rate.prefix], throttled[rate.prefix])
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
        limit=limit,
        ok_per_s=ok / window,
        share_of_limit=0.0 if limit >= UNLIMITED else ok / window / limit,
        requests_per_success=(ok + no) / max(ok, 1),
        throttled=last[2],
        onset_s=onset,
        rank_share_min=min(items) / total,
        rank_share_max=max(items) / total,
        items=sum(items),
        wrong=sum(w for _, _, w, _ in reports),
        errors=[e for *_, e in reports if e],
    )


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for key in dict.fromkeys((r.layout, r.mode) for r in runs):
        group = [r for r in runs if (r.layout, r.mode) == key]
        onsets = [r.onset_s for r in group if r.onset_s is not None]
        rows.append(
            {
                "layout": key[0],
                "mode": key[1],
                "runs": len(group),
                "limit": _spread([r.limit for r in group]) if key[1] != "calibrate" else None,
                "ok_per_s": _spread([r.ok_per_s for r in group]),
                "share_of_limit": _spread([r.share_of_limit for r in group]),
                "requests_per_success": _spread([r.requests_per_success for r in group]),
                "onset_s": _spread(onsets) if onsets else None,
                "rank_share": [
                    min(r.rank_share_min for r in group),
                    max(r.rank_share_max for r in group),
                ],
                "wrong": sum(r.wrong for r in group),
                "errors": sum(len(r.errors) for r in group),
            }
        )
    return rows


def _cell(spread: dict[str, float] | None, fmt: str) -> str:
    if spread is None:
        return "-"
    return f"{spread['median']:{fmt}} ({spread['min']:{fmt}}-{spread['max']:{fmt}})"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| layout | reader | limit GET/s | ok GET/s | share of limit | requests/success "
        "| onset s | rank share | wrong | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lo, hi = row["rank_share"]
        lines.append(
            f"| {row['layout']} | {row['mode']} | {_cell(row['limit'], '.0f')} "
            f"| {_cell(row['ok_per_s'], '.0f')} | {_cell(row['share_of_limit'], '.2f')} "
            f"| {_cell(row['requests_per_success'], '.2f')} | {_cell(row['onset_s'], '.2f')} "
            f"| {lo:.2f}-{hi:.2f} | {row['wrong']} | {row['errors']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench throttle", description=__doc__)
    parser.add_argument("--layouts", default="3x2", help="comma-separated RANKSxWORKERS")
    parser.add_argument("--seconds", type=float, default=10.0, help="window of each run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repeat of 5 s")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats = 5.0, 1
    layouts = [Layout.parse(text) for text in args.layouts.split(",")]
    runs: list[Run] = []
    with S3Server() as endpoint:
        digests = _upload(endpoint)
        for repeat in range(args.repeats):
            for layout in layouts:
                calibration = run_once(
                    endpoint, digests, layout, "calibrate", UNLIMITED, args.seconds
                )
                limit = max(1.0, round(calibration.ok_per_s / 3))
                runs.append(calibration)
                for mode in ("adaptive", "fixed"):
                    runs.append(run_once(endpoint, digests, layout, mode, limit, args.seconds))
                    last = runs[-1]
                    print(
                        f"repeat {repeat + 1} {layout} {mode}: limit {limit:.0f} GET/s "
                        f"(demand {calibration.ok_per_s:.0f}), {last.share_of_limit:.2f} of it, "
                        f"{last.requests_per_success:.2f} requests/success, "
                        f"{last.wrong} wrong, errors {last.errors}",
                        file=sys.stderr,
                    )
    rows = summarize(runs)
    print(table(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "command": "python -m bench throttle " + " ".join(argv or sys.argv[2:]),
        "objects": OBJECTS,
        "object_bytes": OBJECT_BYTES,
        "seconds": args.seconds,
        "summary": rows,
        "runs": [asdict(r) for r in runs],
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    bad = any(r.wrong or (r.errors and r.mode != "fixed") for r in runs)
    return 1 if bad else 0

"""A data set of many single objects: listing, the first batch, the index's memory (issue 53).

    python -m bench scale                     # 1,000,000 keys of 1 KiB, 3 runs of each
    python -m bench scale --keys 10000000     # ten million, where time allows
    python -m bench scale --quick             # 5,000 keys, 1 run, 3 s of reading

On a synthetic S3 endpoint (`testing.synthetic_s3`: keys computed, not stored, in a process of
its own) with `--keys` objects of `--size` bytes under s3://synth/train/:
(a) a plain boto3 paginator lists every key; (b) native_loader's `S3Reader.list` lists them;
(c) what a new user does: `python -m advisor recommend s3://synth/train/ --endpoint-url URL
--no-trial --export PATH` once, then in a fresh process per run the module's
`make_dataloader(num_workers=2, batch_size=256)` and the time to its first batch (its listing
included), and again in a second process with the first one's home and cache (a later run);
(d) that process's resident memory before `make_dataloader` and at its highest
after it (after it, at the first batch, after the reading), per key: the set's index;
(e) each worker's private memory (Private_Clean + Private_Dirty) after `--read-s` s of reading,
and the samples read; (f) samples/s over the last two thirds of that window (the per-epoch
rate). Each measurement is a fresh process (`bench.scale_probe`), the runs interleaved (a b c,
a b c, ...); figures are medians with the range. Every listing is checked: every key once, in
order. The server's CPU time is recorded beside each (a listing's time is the client's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.record import REPO, begin
from testing.synthetic_keyspace import Keyspace
from testing.synthetic_s3 import SyntheticS3

RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"
MIB = 2**20


def user_env(s3: SyntheticS3, home: Path) -> dict[str, str]:
    """The endpoint's environment with `home` as the user's home and cache (a new user's
    first run starts from an empty one; a later run finds what the first one kept there)."""
    home.mkdir(parents=True, exist_ok=True)
    return s3.env() | {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}


def _probe(
    s3: SyntheticS3, args: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run `bench.scale_probe` with `args` against the endpoint: its JSON, with the server's
    CPU seconds and the probe's wall seconds added."""
    from advisor.measure.hardware.host import cpu_seconds

    server_cpu, started = cpu_seconds(s3.pid), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale_probe", *args],
        cwd=REPO, env=env or s3.env(), capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"bench.scale_probe {args[0]} failed: {done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["server_cpu_s"] = cpu_seconds(s3.pid) - server_cpu
    out["wall_s"] = time.perf_counter() - started
    return out


def recommend(
    s3: SyntheticS3, module: Path, env: dict[str, str], timeout_s: float
) -> dict[str, Any]:
    """`python -m advisor recommend ... --no-trial --export module`, as a new user runs it."""
    command = [
        sys.executable, "-m", "advisor", "recommend", s3.space.uri, "--endpoint-url", s3.url,
        "--no-trial", "--export", str(module), "--json", "--quiet",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0 or not module.exists():
        raise RuntimeError(f"advisor recommend failed ({done.returncode}): {done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    profile = result.get("profile", {})
    return {
        "seconds": seconds,
        "object_count": profile.get("object_count"),
        "listed_objects": profile.get("listed_objects"),
        "sampled": profile.get("sampled"),
        "list_seconds": profile.get("list_seconds"),
        "config": json.loads(module.with_suffix(".json").read_text()),
    }


def steady_rate(run: dict[str, Any]) -> float:
    """Samples/s over the last two thirds of the reading window."""
    times, samples = run["times"], run["samples"]
    start = next(i for i, t in enumerate(times) if t >= times[-1] / 3)
    if times[-1] <= times[start]:
        return 0.0
    return (samples[-1] - samples[start]) / (times[-1] - times[start])


def index_bytes(run: dict[str, Any]) -> int:
    """The training process's growth from before `make_dataloader` to its highest after it."""
    after = ("rss_after_make", "rss_after_first_batch", "rss_after_reading")
    return max(run[k] for k in after) - int(run["rss_before"])


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def summarize(runs: dict[str, list[dict[str, Any]]], keys: int) -> dict[str, dict[str, float]]:
    boto3 = [r["seconds"] for r in runs["boto3"]]
    loader = runs["loader"]
    return {
        "boto3_list_s": spread(boto3),
        "native_list_s": spread([r["seconds"] for r in runs["native"]]),
        "first_batch_s": spread([r["first_batch_s"] for r in loader]),
        "first_batch_again_s": spread([r["first_batch_s"] for r in runs["loader_again"]]),
        "first_batch_vs_boto3": spread(
            [r["first_batch_s"] / statistics.median(boto3) for r in loader]
        ),
        "index_mib": spread([index_bytes(r) / MIB for r in loader]),
        "index_bytes_per_key": spread([index_bytes(r) / keys for r in loader]),
        "worker_private_mib": spread(
            [max(r["worker_private_after_reading"].values(), default=0) / MIB for r in loader]
        ),
        "samples_read": spread([r["samples_read"] for r in loader]),
        "samples_per_s": spread([steady_rate(r) for r in loader]),
        "server_cpu_per_boto3_list_s": spread([r["server_cpu_s"] for r in runs["boto3"]]),
        "server_cpu_per_native_list_s": spread([r["server_cpu_s"] for r in runs["native"]]),
    }


def _fmt(s: dict[str, float], digits: int = 1, unit: str = "") -> str:
    def one(v: float) -> str:
        return f"{v:,.{digits}f}"

    return f"{one(s['median'])}{unit} ({one(s['low'])}-{one(s['high'])})"


def table(summary: dict[str, dict[str, float]], keys: int, read_s: float, runs: int) -> str:
    s = summary
    rows = [
        ("a plain boto3 paginator lists every key", _fmt(s["boto3_list_s"], unit=" s")),
        ("native_loader's `S3Reader.list` lists them", _fmt(s["native_list_s"], unit=" s")),
        (
            "`make_dataloader(num_workers=2, batch_size=256)` to the first batch (listing "
            "included); its share of the boto3 listing (bar: 0.1)",
            f"{_fmt(s['first_batch_s'], unit=' s')}; {_fmt(s['first_batch_vs_boto3'], 2)}",
        ),
        (
            "the same in a second process, the first one's home and cache kept (a later run)",
            _fmt(s["first_batch_again_s"], unit=" s"),
        ),
        (
            "the training process's memory for the index, and per key (bar: 100 B)",
            f"+{_fmt(s['index_mib'], 0, ' MiB')}; {_fmt(s['index_bytes_per_key'], 0, ' B')}",
        ),
        (
            f"each worker's private memory after {read_s:g} s of reading (the larger of 2; "
            "bar: 100 MiB), and the samples read",
            f"{_fmt(s['worker_private_mib'], 0, ' MiB')}; {_fmt(s['samples_read'], 0)}",
        ),
        (
            f"samples/s from {read_s / 3:.3g} s to {read_s:g} s of reading (the per-epoch rate)",
            _fmt(s["samples_per_s"], 0),
        ),
        (
            "the server's CPU for a boto3 listing / a native listing",
            f"{_fmt(s['server_cpu_per_boto3_list_s'], unit=' s')} / "
            f"{_fmt(s['server_cpu_per_native_list_s'], unit=' s')}",
        ),
    ]
    head = f"| {keys:,} keys of 1 KiB | median (range), {runs} runs |\n|---|---|\n"
    return head + "\n".join(f"| {what} | {value} |" for what, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__)
    parser.add_argument("--keys", type=int, default=None, help="default 1,000,000 (quick 5,000)")
    parser.add_argument("--size", type=int, default=1024, help="bytes of every object")
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (quick 1)")
    parser.add_argument("--read-s", type=float, default=None, help="default 15 (quick 3)")
    parser.add_argument("--quick", action="store_true", help="5,000 keys, 1 run, 3 s reading")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    keys = args.keys or (5_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    read_s = args.read_s or (3.0 if args.quick else 15.0)
    if keys < 1 or repeats < 1 or read_s <= 0:
        parser.error(f"{keys=} and {repeats=} must be >= 1, {read_s=} > 0")
    run = begin("scale", argv)
    # bounds: ten times the slowest measured rate (boto3: 61 s per million keys on 2 cores)
    list_timeout = 120 + keys * 600e-6
    runs: dict[str, list[dict[str, Any]]] = {
        "boto3": [], "native": [], "loader": [], "loader_again": []
    }  # fmt: skip
    space = Keyspace(count=keys, size=args.size)
    with SyntheticS3(space) as s3, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folder = Path(tmp)
        module = folder / "synth_loader.py"
        advised_home = folder / "home-recommend"
        advice = recommend(s3, module, user_env(s3, advised_home), list_timeout)
        for number in range(repeats):
            for mode in ("boto3", "native"):
                runs[mode].append(_probe(s3, [mode, space.uri, str(keys)], list_timeout))
            # every run is the new user's first, in a copy of the home recommend left
            home = folder / f"home-{number}"
            shutil.copytree(advised_home, home)
            loader = ["loader", str(module), str(keys)]
            reading = [*loader, "--read-s", str(read_s)]
            runs["loader"].append(_probe(s3, reading, list_timeout + read_s, user_env(s3, home)))
            again = [*loader, "--read-s", "0"]
            runs["loader_again"].append(_probe(s3, again, list_timeout, user_env(s3, home)))
    summary = summarize(runs, keys)
    markdown = table(summary, keys, read_s, repeats)
    body = {
        "keys": keys, "size": args.size, "repeats": repeats, "read_s": read_s,
        "recommend": advice, "summary": summary, "runs": runs,
    }  # fmt: skip
    run.write(args.out, body, markdown=markdown, indent=2)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

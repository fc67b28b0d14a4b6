"""``python -m bench watch-check``: `advisor.watch` on plain PyTorch training loops, each with one
known cause injected (issue 41's bar).

Each scenario is a training loop as a user writes it, given to `watch` with the function that
makes its loader, as proof after asks: the first epoch is watched, the advised change is made at
its end, and the epochs after read the changed loader, in the same run. Per scenario and round:
whether the report named the injected cause (a trip's cause, or the bottleneck's stage), the
change, the gain it predicted, and the gain measured after it (the report's proof). The bar:
the cause named, and the predicted gain within 20% of the measured one.

The causes: latency on S3 (boto3 in `__getitem__`, through the project's latency proxy, in
front of SeaweedFS), latency with a worker (a sleep), a transform that holds the GIL, 100
tensors a batch, fewer shards than workers, and workers started anew every epoch with a slow
start. A small /dev/shm cannot be made here without a container (tests/front/test_watch.py
feeds the report a small one instead). A table on stdout, JSON in --out.

    python -m bench watch-check [--rounds 3] [--only NAME ...] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

import advisor
from advisor.demo.server import S3Endpoint, S3Server
from bench.netem import proxy_process, raise_priority
from bench.record import begin

RESULTS = Path("bench/results/watch_check.json")
BAR = 0.2  # the predicted gain within this share of the measured one
BUCKET, OBJECTS, OBJECT_BYTES, S3_LATENCY_MS = "watch-check", 160, 10_000, 20


class Sleepy(Dataset[torch.Tensor]):
    """Each sample waits `latency_s` with the GIL released (I/O), then is a small tensor."""

    def __init__(self, n: int, latency_s: float) -> None:
        self.n, self.latency_s = n, latency_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.latency_s)
        return torch.full((3,), i)


class Burning(Sleepy):
    """Each sample holds the GIL for `latency_s` (a Python transform)."""

    def __getitem__(self, i: int) -> torch.Tensor:
        end = time.perf_counter() + self.latency_s
        while time.perf_counter() < end:
            pass
        return torch.full((3,), i)


class Many(Sleepy):
    """Each sample waits `latency_s`, then is 25 tensors: a batch of 4, uncollated, is 100."""

    def __getitem__(self, i: int) -> list[torch.Tensor]:  # type: ignore[override]
        time.sleep(self.latency_s)
        return [torch.zeros(16) for _ in range(25)]


class OneShard(IterableDataset[torch.Tensor]):
    """A data set of one shard, which one worker reads (as a streamed set after `shuffle()`)."""

    n_shards = 1

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = torch.utils.data.get_worker_info()
        if info is None or info.id == 0:
            for i in range(240):
                time.sleep(0.004)
                yield torch.tensor(i)


class FromS3(Dataset[torch.Tensor]):
    """One object a sample, read with boto3 in `__getitem__` (a client per process)."""

    def __init__(self, endpoint: S3Endpoint, url: str) -> None:
        self.endpoint, self.url = endpoint, url
        self.client: Any = None
        self.pid = 0  # the process the client was made in: a forked worker makes its own

    def __len__(self) -> int:
        return OBJECTS

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.client is None or self.pid != os.getpid():
            self.client = S3Endpoint(self.url, self.endpoint.credentials).boto3_client()
            self.pid = os.getpid()
        body = self.client.get_object(Bucket=BUCKET, Key=f"o/{i:04d}")["Body"].read()
        return torch.frombuffer(bytearray(body[:4]), dtype=torch.uint8)


def _uncollated(samples: list[Any]) -> list[Any]:
    return samples


def _slow_start(_: int) -> None:
    time.sleep(0.3)


@dataclass(frozen=True)
class Scenario:
    """A training loop with one cause injected: `make(**change)` makes its loader, each step
    sleeps `step_s`, and the report must name `cause` (a trip's cause or a bottleneck's stage).
    `min_steps`: the steps watch takes before it judges (a dip at each epoch's start shows from
    the second epoch on)."""

    name: str
    cause: str
    make: Callable[..., Any]
    step_s: float = 0.01
    epochs: int = 3
    min_steps: int = 10


def _maker(dataset: Any, **settings: Any) -> Callable[..., Any]:
    """The user's function that makes the loader, taking a change as a keyword argument."""

    def make_loader(**change: Any) -> DataLoader[Any]:
        return DataLoader(dataset, **{**settings, **change})

    return make_loader


def scenarios(endpoint: S3Endpoint | None, proxied: str | None) -> list[Scenario]:
    """The scenarios; the one on S3 where an endpoint (and the proxy in front of it) is given."""
    kept = {"persistent_workers": True}
    found = [
        Scenario(
            "latency, 1 worker", "storage",
            _maker(Sleepy(320, 0.004), batch_size=8, num_workers=1, **kept),
        ),
        Scenario("GIL transform, 0 workers", "decode", _maker(Burning(320, 0.004), batch_size=8)),
        Scenario(
            "100 tensors, 1 worker", "boundary",
            _maker(Many(320, 0.001), batch_size=4, num_workers=1, collate_fn=_uncollated, **kept),
            step_s=0.005,
        ),
        Scenario(
            "1 shard, 2 workers", "shards",
            _maker(OneShard(), batch_size=8, num_workers=2, **kept),
        ),
        Scenario(
            "slow start every epoch", "restart",
            _maker(Sleepy(160, 0.0), batch_size=8, num_workers=2, worker_init_fn=_slow_start),
            epochs=4,
        ),
    ]  # fmt: skip
    if endpoint is not None and proxied is not None:
        s3 = _maker(FromS3(endpoint, proxied), batch_size=8)
        ours = _maker(_native_dataset(endpoint, proxied), batch_size=8)
        found[:0] = [
            Scenario(f"S3 +{S3_LATENCY_MS} ms, 0 workers", "storage", s3),
            Scenario(
                f"S3 +{S3_LATENCY_MS} ms, our reader", "epoch-start", ours, epochs=4, min_steps=35
            ),
        ]
    return found


def _native_dataset(endpoint: S3Endpoint, proxied: str) -> Any:
    """The objects read with `native_loader`, which keeps requests in flight within a process:
    the latency shows only where nothing is, at each epoch's start."""
    from native_loader import Credentials, ReaderConfig, S3IterableDataset
    from native_loader.decoders import decode_raw

    keys = endpoint.credentials
    return S3IterableDataset(
        f"s3://{BUCKET}/o/", transform=decode_raw,
        config=ReaderConfig(endpoint_url=proxied, region=endpoint.region),
        credentials=Credentials(keys.access_key, keys.secret_key),
    )  # fmt: skip


@dataclass(frozen=True)
class Round:
    """One run of a scenario: what the first epoch's report named and advised, and the proof."""

    named: bool
    causes: tuple[str, ...]
    change: str | None
    predicted_gain: float | None
    measured_gain: float | None

    @property
    def error(self) -> float | None:
        if self.predicted_gain is None or not self.measured_gain:
            return None
        return self.predicted_gain / self.measured_gain - 1

    @property
    def passed(self) -> bool:
        """The cause named, and any change's predicted gain within the bar of the measured."""
        return self.named and (self.error is None or abs(self.error) <= BAR)


def run_round(scenario: Scenario) -> Round:
    # a benchmark's loops are no runs of the user's: kept out of the run history
    watched = advisor.watch(scenario.make, out=None, min_steps=scenario.min_steps, history=False)
    for _ in range(scenario.epochs):
        for _batch in watched:
            time.sleep(scenario.step_s)
    # what was judged of the user's loader: the report whose change was swapped in, else the last
    judged = watched.doctor.before[1] if watched.doctor.before else watched.reports[-1]
    causes = tuple(t.cause for t in judged.trips) + (
        (judged.bottleneck.stage,) if judged.bottleneck is not None else ()
    )
    change, proof = judged.change, watched.reports[-1].proof
    if change is None or proof is None or proof.after_samples_per_s is None:
        return Round(scenario.cause in causes, causes, None, None, None)
    return Round(
        scenario.cause in causes,
        causes,
        f"{change.setting} {change.now} -> {change.to}",
        change.predicted_samples_per_s / change.measured_samples_per_s,
        proof.after_samples_per_s / proof.before_samples_per_s,
    )


@contextlib.contextmanager
def s3_with_latency() -> Iterator[tuple[S3Endpoint, str]]:
    """SeaweedFS on 127.0.0.1 with the objects, and the latency proxy in front of it."""
    server = S3Server()
    with server as endpoint, proxy_process(endpoint.url, S3_LATENCY_MS) as proxied:
        if server.pid is not None:  # it stands for the network: not queued behind the loop
            raise_priority(server.pid)
        client = endpoint.boto3_client()
        client.create_bucket(Bucket=BUCKET)
        for i in range(OBJECTS):
            client.put_object(Bucket=BUCKET, Key=f"o/{i:04d}", Body=bytes(OBJECT_BYTES))
        yield endpoint, proxied


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return fmt.format(mid) + (
        f" ({fmt.format(low)} to {fmt.format(high)})" if len(values) > 1 else ""
    )


def table(results: dict[str, list[Round]]) -> str:
    lines = [
        "| scenario | cause named | change | predicted gain | measured gain | error |",
        "|---|---|---|---:|---:|---:|",
    ]
    for name, rounds in results.items():
        named = sum(r.named for r in rounds)
        changes = sorted({r.change or "none" for r in rounds})
        predicted = [r.predicted_gain for r in rounds if r.predicted_gain is not None]
        measured = [r.measured_gain for r in rounds if r.measured_gain is not None]
        errors = [r.error for r in rounds if r.error is not None]
        lines.append(
            f"| {name} | {named} of {len(rounds)} | {', '.join(changes)} | "
            f"{_spread(predicted, '{:.2f}x')} | {_spread(measured, '{:.2f}x')} | "
            f"{_spread(errors, '{:+.0%}')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench watch-check", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each scenario")
    parser.add_argument("--quick", action="store_true", help="one round, no S3")
    parser.add_argument("--only", nargs="+", help="scenarios whose name starts so")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    run = begin("watch-check", argv)
    rounds = 1 if args.quick else args.rounds
    warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
    results: dict[str, list[Round]] = {}
    with contextlib.ExitStack() as stack:
        endpoint = proxied = None
        if not args.quick:
            endpoint, proxied = stack.enter_context(s3_with_latency())
        chosen = [
            s for s in scenarios(endpoint, proxied)
            if not args.only or any(s.name.startswith(o) for o in args.only)
        ]  # fmt: skip
        for scenario in chosen:
            for _ in range(rounds):
                outcome = run_round(scenario)
                results.setdefault(scenario.name, []).append(outcome)
                print(f"{scenario.name}: {outcome}", flush=True)
    print()
    print(table(results))
    failed = [name for name, rs in results.items() if not all(r.passed for r in rs)]
    print(f"\nmissed the bar: {', '.join(failed) if failed else 'none'}")
    run.write(
        args.out,
        {
            "bar": BAR,
            "scenarios": {
                name: [asdict(r) | {"error": r.error} for r in rs] for name, rs in results.items()
            },
            "missed": failed,
        },
    )
    return 0

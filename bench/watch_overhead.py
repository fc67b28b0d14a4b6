"""``python -m bench watch``: what `advisor.watch` adds to each step of a training loop.

The same loop over batches already in memory with an empty step, run plain and watched,
interleaved, ROUNDS times of STEPS steps: the watch's own cost per step is the watched loop's
time less the plain one's, over its steps. On a shared machine a round is sometimes preempted,
so the table gives the least-disturbed round (as `timeit` does) beside the median, and that cost
as a share of a 1 ms and a 10 ms step; the bar is under 1% of the step (issue 41). The step's
own length does not change what the watch does per step (two clock reads each side of the
yield, three appends). Apart from the steps, the loop reads the process tree at a batch's
arrival at most every READ_PERIOD_S (`TreeMeter`): the bench times that reading with a
DataLoader's workers alive (READ_WORKERS of them) and gives it as a share of the loop's time,
the most it can take whatever the step. A table on stdout, JSON in --out.

    python -m bench watch [--steps N] [--rounds R] [--out PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import torch

import advisor
from advisor.measure.hardware.processes import READ_PERIOD_S, TreeMeter
from bench.record import begin

STEPS_MS = (1.0, 10.0)


def _loop(batches: list[torch.Tensor], watched: bool) -> float:
    source = advisor.watch(batches, every=50, out=None, history=False) if watched else batches
    started = time.perf_counter()
    for _ in source:
        pass
    return time.perf_counter() - started


READ_WORKERS = 8
READS = 200


class _Items(torch.utils.data.Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.zeros(4)


def _reading_s() -> list[float]:
    """Seconds one reading of the process tree takes, READS times, with READ_WORKERS workers."""
    with warnings.catch_warnings():  # torch's warning on more workers than cores: intended
        warnings.simplefilter("ignore", UserWarning)
        loader = torch.utils.data.DataLoader(
            _Items(), batch_size=4, num_workers=READ_WORKERS, persistent_workers=True
        )
        batches = iter(loader)
    next(batches)  # the workers are up
    meter = TreeMeter()
    meter.start()
    times = []
    for _ in range(READS):
        started = time.perf_counter()
        meter.read()
        times.append(time.perf_counter() - started)
    del batches
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench watch", description=__doc__)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="5,000 steps, 3 rounds")
    parser.add_argument("--out", type=Path, default=Path("bench/results/watch.json"))
    args = parser.parse_args(argv)
    run = begin("watch", argv)
    if args.quick:
        args.steps, args.rounds = 5_000, 3
    batches = [torch.zeros(64, 3) for _ in range(args.steps)]
    extra: list[float] = []
    for _ in range(args.rounds):
        plain = _loop(batches, watched=False)
        watched = _loop(batches, watched=True)
        extra.append((watched - plain) / args.steps)
    low, median = min(extra), statistics.median(extra)
    print(f"the watch's cost per step over {args.rounds} rounds of {args.steps:,} steps: "
          f"least disturbed {low * 1e6:.2f} us, median {median * 1e6:.2f} us "
          f"(range {low * 1e6:.2f} to {max(extra) * 1e6:.2f})")  # fmt: skip
    print("| step | share (least disturbed) | share (median) |")
    print("|---:|---:|---:|")
    for step_ms in STEPS_MS:
        print(f"| {step_ms:g} ms | {low / (step_ms / 1e3):.3%} | {median / (step_ms / 1e3):.3%} |")
    reads = _reading_s()
    read_low, read_median = min(reads), statistics.median(reads)
    print(f"the process tree's reading with {READ_WORKERS} workers, {READS} times: "
          f"least {read_low * 1e3:.3f} ms, median {read_median * 1e3:.3f} ms "
          f"(up to {max(reads) * 1e3:.3f}); at most one per {READ_PERIOD_S:g} s: "
          f"{read_median / READ_PERIOD_S:.3%} of the loop's time (median)")  # fmt: skip
    run.write(
        args.out,
        {
            "steps": args.steps,
            "rounds": args.rounds,
            "cost_s_per_step": extra,
            "read_workers": READ_WORKERS,
            "read_period_s": READ_PERIOD_S,
            "reading_s": reads,
        },
    )
    return 0

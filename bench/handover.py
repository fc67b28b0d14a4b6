"""DataLoader workers: the hand-over of a batch, and the first full collection in a new worker.

    python -m bench handover [--repeats 3] [--quick] [--out bench/results/handover.json]

(a) Hand-over: 60 batches of 32 tensors of 3x224x224 uint8 (a decoded, resized image each) from
2 workers to the training process, collated as a plain list (one shared-memory segment per
tensor), as `native_loader.batch.SampleList` (what `collate_list` returns: one block per
dtype), and stacked by torch's `default_collate` (one tensor); samples/s over the 60 batches.
(b) Text: 1,000 batches of 512 lines of ~1.1 KB (a batch of text records, ~600 KB of str, which
crosses through the result queue's pipe, not shared memory) from 4 workers, through Linux's
default 64 KiB pipe or the factory's `wide_pipe_context` (1 MiB); lines/s after the first batch
(the workers' start left out) and the CPU of the process tree per line over the same span.
(c) A new worker's first full collection: the CPU time of `gc.collect()` as the first sample of
a worker of `native_loader.loader.make_dataloader`, with and without `FreezeInherited`'s
`gc.freeze()` (in a worker that decodes, allocation triggers that collection in its first
batch).
Each configuration runs `--repeats` times, interleaved; figures are medians with the range.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, default_collate

from bench.record import begin
from native_loader.decoders import collate_list
from native_loader.loader import (
    FreezeInherited,
    LoaderSettings,
    make_dataloader,
    make_dataset,
    wide_pipe_context,
)

RESULTS = Path(__file__).resolve().parent / "results" / "handover.json"
BATCHES, BATCH, WORKERS = 60, 32, 2


class Images(IterableDataset[torch.Tensor]):
    def __iter__(self) -> Iterator[torch.Tensor]:
        image = torch.zeros(3, 224, 224, dtype=torch.uint8)
        for _ in range(BATCHES * BATCH // WORKERS):
            yield image.clone()


def plain_list(batch: list[Any]) -> list[Any]:
    return list(batch)


def handover(collate: Callable[[list[Any]], Any]) -> float:
    loader = DataLoader(Images(), batch_size=BATCH, num_workers=WORKERS, collate_fn=collate)
    started, samples = time.perf_counter(), 0
    for batch in loader:
        samples += len(batch)
    return samples / (time.perf_counter() - started)


LINE_BATCHES, LINE_BATCH, LINE_WORKERS = 1000, 512, 4


class Lines(IterableDataset[str]):
    def __iter__(self) -> Iterator[str]:
        line = "w123 " * 225
        for i in range(LINE_BATCHES * LINE_BATCH // LINE_WORKERS):
            yield f"{i:08d} {line}"


def _tree_cpu_s() -> float:
    """CPU seconds of this process, its live workers and those already joined."""
    from advisor.measure.hardware.host import cpu_seconds, process_tree

    own = resource.getrusage(resource.RUSAGE_SELF)
    joined = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = sum(cpu_seconds(pid) for pid in process_tree(os.getpid())[1:])
    return own.ru_utime + own.ru_stime + joined.ru_utime + joined.ru_stime + live


def text_handover(wide: bool) -> tuple[float, float]:
    """(lines/s, CPU ms per line of this process and its workers) for batches of lines, from
    the first batch on."""
    context = wide_pipe_context() if wide else None
    loader = DataLoader(
        Lines(), batch_size=LINE_BATCH, num_workers=LINE_WORKERS,
        collate_fn=collate_list, multiprocessing_context=context,
    )  # fmt: skip
    batches = iter(loader)
    next(batches)
    cpu, started, lines = _tree_cpu_s(), time.perf_counter(), 0
    for batch in batches:
        lines += len(batch)
    elapsed, cpu = time.perf_counter() - started, _tree_cpu_s() - cpu
    del batches  # the workers exit
    return lines / elapsed, 1000 * cpu / lines


def collect_once(_: Any) -> float:
    """The transform: CPU seconds of a full collection in this worker (what its first one costs,
    whenever allocation triggers it: in a decoding worker, during its first batch)."""
    started = time.process_time()
    gc.collect()
    return time.process_time() - started


def first_collection(folder: str, freeze: bool) -> float:
    """CPU seconds of the first full collection in a new worker of the factory's DataLoader."""
    dataset = make_dataset(folder, transform=collect_once, shuffle=False)
    loader = make_dataloader(dataset, LoaderSettings(batch_size=1, num_workers=1))
    if not freeze:  # what a DataLoader without the factory's worker_init_fn does
        loader.worker_init_fn = None
    assert freeze == isinstance(loader.worker_init_fn, FreezeInherited)
    return float(next(iter(loader))[0])


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench handover", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run of each")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    run = begin("handover", argv)
    repeats = 1 if args.quick else args.repeats
    collates = {"plain list": plain_list, "SampleList": collate_list, "stacked": default_collate}
    rates: dict[str, list[float]] = {name: [] for name in collates}
    text: dict[str, list[float]] = {k: [] for k in ("64 KiB pipe", "wide pipe")}
    text_cpu: dict[str, list[float]] = {k: [] for k in text}
    firsts: dict[str, list[float]] = {"frozen": [], "not frozen": []}
    with tempfile.TemporaryDirectory(prefix="bench-handover-") as folder:
        for i in range(BATCH):
            (Path(folder) / f"{i:03d}.bin").write_bytes(b"x" * 1000)
        for _ in range(repeats):
            for name, collate in collates.items():
                rates[name].append(handover(collate))
            for name in text:
                rate, cpu_ms = text_handover(wide=name == "wide pipe")
                text[name].append(rate)
                text_cpu[name].append(cpu_ms)
            for name in firsts:
                firsts[name].append(first_collection(folder + "/", freeze=name == "frozen"))
    out: dict[str, Any] = {
        "handover_samples_per_s": {k: _spread(v) for k, v in rates.items()},
        "text_handover_lines_per_s": {k: _spread(v) for k, v in text.items()},
        "text_handover_cpu_ms_per_line": {k: _spread(v) for k, v in text_cpu.items()},
        "worker_first_full_gc_cpu_s": {k: _spread(v) for k, v in firsts.items()},
    }
    run.write(args.out, out, indent=2)
    print("| measure | configuration | median (range) |\n|---|---|---|")
    for measure in out:
        for name, s in out[measure].items():
            low, high = _fmt(s["low"]), _fmt(s["high"])
            print(f"| {measure} | {name} | {_fmt(s['median'])} ({low}-{high}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

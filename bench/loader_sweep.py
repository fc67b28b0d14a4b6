"""An exported loader module swept as an outsider measures it (`bench advisor-check`, `bench
plan-check`), sharing no code with the trial's measurement (advisor/measure/trial/sweep.py).

Each run is a fresh `make_dataloader(num_workers=w)` of the module in a training loop whose step
takes `batch / consumer_rate` seconds, as a blocking wait (sleep) and as a spinning core (a
Python busy loop in the main thread, as a naive harness would write it: it also holds the GIL,
which a real `torch.cuda.synchronize` spin does not); samples are counted after WARM_SECONDS
of warm-up. Runs are interleaved (every count and step model once, then again), and a chosen
count is scored per step model as min(its median, consumer) over the best count's, with the
range that pairs its slowest run with the best's fastest, and the reverse.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

WARM_SECONDS = 1.5

# step model -> num_workers (as a string, the JSON's key) -> samples/s per run
Runs = dict[str, dict[str, list[float]]]


def step(seconds: float, mode: str) -> None:
    if mode == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def step_modes(consumer_rate: float | None) -> tuple[str, ...]:
    """The step models a consumer rate calls for: none without one."""
    return ("sleep", "spin") if consumer_rate else ("none",)


def run_loader(
    module: Any, workers: int, mode: str, consumer: float | None, seconds: float
) -> float:
    """Samples/s a training loop sees from a fresh `make_dataloader(num_workers=workers)`."""
    loader = module.make_dataloader(num_workers=workers)
    started = time.monotonic()
    counted = 0
    t0 = None
    try:
        while True:
            for batch in loader:
                now = time.monotonic()
                if t0 is None and now - started >= WARM_SECONDS:
                    t0 = now
                elif t0 is not None:
                    counted += len(batch)
                    if now - t0 >= seconds:
                        return counted / (now - t0)
                if consumer:
                    step(len(batch) / consumer, mode)
                if now - started > 4 * (seconds + WARM_SECONDS):  # a stalled loader
                    return counted / max(now - (t0 or now), 1e-6)
    finally:
        iterator = getattr(loader, "_iterator", None)
        if iterator is not None:
            iterator._shutdown_workers()


def sweep(
    modules: Sequence[Any], counts: Iterable[int], consumer: float | None, seconds: float,
    runs: int, each: Callable[[int, int, str, float], None] | None = None,
) -> list[Runs]:  # fmt: skip
    """Per module, samples/s per step model and count over `runs` interleaved rounds: in each
    round every count, every step model and every module once, in that nesting. `each(module
    index, workers, mode, rate)` is told every run as it ends."""
    counts = sorted(set(counts))
    modes = step_modes(consumer)
    out: list[Runs] = [{m: {str(w): [] for w in counts} for m in modes} for _ in modules]
    for _ in range(runs):
        for workers in counts:
            for mode in modes:
                for i, module in enumerate(modules):
                    rate = round(run_loader(module, workers, mode, consumer, seconds), 1)
                    out[i][mode][str(workers)].append(rate)
                    if each is not None:
                        each(i, workers, mode, rate)
    return out


def median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


@dataclass(frozen=True)
class Score:
    """A chosen count against the best one, per step model."""

    scores: dict[str, float]  # min(chosen's median, consumer) / min(best's median, consumer)
    ranges: dict[str, tuple[float, float]]  # chosen's slowest run vs best's fastest, and back
    best: dict[str, int]  # the best count (highest median) among those scored

    @property
    def score(self) -> float:
        """The lower of the step models' scores."""
        return min(self.scores.values())


def score(
    runs: Runs, chosen: int, consumer: float | None, within: Callable[[int], bool] | None = None
) -> Score:
    """`chosen`'s score per step model against the best of the counts `within` allows (all
    where None); both capped at the consumer's rate where there is one."""
    cap = (lambda r: min(r, consumer)) if consumer else (lambda r: r)
    scores, ranges, best = {}, {}, {}
    for mode, per_count in runs.items():
        scored = {w: r for w, r in per_count.items() if within is None or within(int(w))}
        medians = {w: statistics.median(r) for w, r in scored.items()}
        top = max(medians, key=lambda w: medians[w])
        mine = per_count[str(chosen)]
        scores[mode] = round(cap(statistics.median(mine)) / cap(medians[top]), 3)
        ranges[mode] = (
            round(cap(min(mine)) / cap(max(scored[top])), 3),
            round(cap(max(mine)) / cap(min(scored[top])), 3),
        )
        best[mode] = int(top)
    return Score(scores, ranges, best)


def medians(runs: Runs) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Per step model and count: the median and range of its runs."""
    return {m: {w: median_range(r) for w, r in per.items()} for m, per in runs.items()}


def load_module(path: Path) -> ModuleType:
    """The exported module at `path`, imported under its own name."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""The scenarios and the plan of `python -m bench e2e`: each scenario's data, transform, latency,
the consumer's rate and the loaders it runs; the plan's sizes, repetitions and epochs."""

from __future__ import annotations

import os
from dataclasses import dataclass

CORES = os.cpu_count() or 1
FAST_IMAGES = 2000.0  # samples/s: ResNet-50 on one A100-class GPU with AMP
REALISTIC_IMAGES = 100.0  # samples/s: below what the best loaders reach here: who keeps up?
FAST_LINES = 1e6  # lines/s: any loader here is slower; the step costs 0.5 ms per batch


@dataclass(frozen=True)
class Scenario:
    name: str
    data: str  # "images" or "text"
    transform: str  # "decode", "bytes" or "lines"
    latency_ms: int
    consumer_rate: float
    configs: tuple[tuple[str, int | None], ...]  # (loader, num_workers; None = as exported)
    judged: bool = False  # a bar rests on it: it gets the plan's repetitions, others one fewer


def _image_configs(every: bool) -> tuple[tuple[str, int | None], ...]:
    """Every peer at num_workers 0 and = cores where a bar is judged (`every`); elsewhere the
    tutorial at both counts and the fastest peer of the judged scenario (s3torchconnector's map
    dataset at = cores), to bound the run. "exported-nw" overrides the exported num_workers with
    the cores: what the reader does when the advice's cap (NW-1: one core kept for the training
    process) is lifted. Where a bar is judged, "exported-fill" is the same module with its
    first epoch streamed from S3 into a cache instead of a copy made before it (the other way
    a copy-local export may fill local disk); neither counts as a peer."""
    peers = ("boto3", "fsspec", "s3tc-map", "s3tc-iterable") if every else ("boto3",)
    chosen: tuple[tuple[str, int | None], ...] = tuple((p, w) for p in peers for w in (0, CORES))
    if not every:
        chosen += (("s3tc-map", CORES),)
    fill: tuple[tuple[str, int | None], ...] = (("exported-fill", None),) if every else ()
    return (*chosen, ("exported", None), ("exported-nw", CORES), *fill)


TEXT_CONFIGS = (("lines-fsspec", 0), ("lines-native", 0), ("lines-fsspec", 4), ("lines-native", 4))


def scenarios(quick: bool, only: list[str] | None = None) -> list[Scenario]:
    """The default run's scenarios; --quick: the two judged ones, with fewer configurations."""
    every, some = _image_configs(not quick), _image_configs(False)
    text = TEXT_CONFIGS[2:] if quick else TEXT_CONFIGS
    out = [
        Scenario("20ms jpeg fast", "images", "decode", 20, FAST_IMAGES, every, judged=True),
        Scenario("20ms text fast", "text", "lines", 20, FAST_LINES, text, judged=True),
        Scenario("20ms jpeg realistic", "images", "decode", 20, REALISTIC_IMAGES, some),
        Scenario("20ms bytes fast", "images", "bytes", 20, FAST_IMAGES, some),
        Scenario("0ms jpeg fast", "images", "decode", 0, FAST_IMAGES, every, judged=True),
    ]
    if only:
        unknown = set(only) - {s.name for s in out}
        if unknown:
            raise SystemExit(f"--only: unknown {sorted(unknown)}; known: {[s.name for s in out]}")
        return [s for s in out if s.name in only]
    return [s for s in out if s.judged] if quick else out


@dataclass(frozen=True)
class Plan:
    images: int  # objects in the image set; every image epoch reads this many samples
    shards: int
    repeats: int
    trial_seconds: float  # the advisor's default budget: what a user's trial measures
    image_epochs: int  # per image run: the first (from S3) and the later ones


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(images=128, shards=4, repeats=2, trial_seconds=30.0, image_epochs=2)
    return Plan(images=192, shards=4, repeats=3, trial_seconds=30.0, image_epochs=3)

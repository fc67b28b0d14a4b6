"""The user's own training loop, watched: `WatchedLoop` wraps the loader the user trains with and
records, per step, how long the loop waited for its batch and how long the rest of the step
took, as the same `LoopRun` that `diagnose`'s loop records, so both are judged alike.

The loop is the user's: `for batch in watched: ...` yields the loader's batches unchanged, in
their order. Per step it reads two clocks (the wall clock and this thread's CPU clock) and
appends three numbers; the process tree's CPU and memory, and NVML's GPU utilisation, are
sampled in threads (`TreeUsage`, `GpuUtilization`). `LoaderFacts` reads what the loader's
settings and its first batch say about it (workers, prefetch, pinning, persistent workers, the
tensors and bytes that cross from a worker per batch, the data set's shards) and what the
machine allows (`/dev/shm`, the open-file limit).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from advisor.measure.hardware.host import busy_cpu_s, shm_bytes
from advisor.measure.hardware.nvml import GpuUtilization
from advisor.measure.loop.results import LoopRun
from advisor.measure.loop.run import batch_samples
from advisor.measure.loop.usage import TreeUsage


@dataclass(frozen=True)
class LoaderFacts:
    """What the loader's settings and first batch say, and what the machine allows.

    num_workers: None where the loader is no DataLoader (read in the training process).
    shards: the data set's own count of shards (`n_shards`, `num_shards`), where it has one.
    tensors_per_batch / batch_bytes: what one batch holds (each tensor crosses from a worker
        in its own shared-memory segment and file descriptor, unless packed).
    shm_free_bytes: free bytes of /dev/shm; open_files_limit: RLIMIT_NOFILE's soft limit.
    """

    num_workers: int | None
    prefetch_factor: int | None
    pin_memory: bool
    persistent_workers: bool
    batch_size: int | None
    dataset: str
    shards: int | None
    tensors_per_batch: int
    batch_bytes: int
    shm_free_bytes: int | None
    open_files_limit: int | None

    @classmethod
    def of(cls, loader: Any, first_batch: Any, shm_path: str = "/dev/shm") -> LoaderFacts:
        dataset = getattr(loader, "dataset", None)
        workers = getattr(loader, "num_workers", None)
        tensors = list(_tensors(first_batch))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(
            num_workers=workers if isinstance(workers, int) else None,
            prefetch_factor=getattr(loader, "prefetch_factor", None),
            pin_memory=bool(getattr(loader, "pin_memory", False)),
            persistent_workers=bool(getattr(loader, "persistent_workers", False)),
            batch_size=getattr(loader, "batch_size", None),
            dataset=type(dataset).__name__ if dataset is not None else type(loader).__name__,
            shards=_shards(dataset),
            tensors_per_batch=len(tensors),
            batch_bytes=sum(t.numel() * t.element_size() for t in tensors),
            shm_free_bytes=shm_bytes(shm_path),
            open_files_limit=None if soft == resource.RLIM_INFINITY else int(soft),
        )


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a batch, whatever nests it (one storage each when a worker sends it)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def _shards(dataset: Any) -> int | None:
    for name in ("n_shards", "num_shards"):
        value = getattr(dataset, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class WatchedLoop:
    """`for batch in WatchedLoop(loader): ...`: the loader's batches, each step timed.

    `on_step(self)` is called after each step's timing is recorded (the front's summary lines
    and live view); `run()` is the loop so far as a `LoopRun`, at any time, also after it ended.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        *,
        label: str = "your loader",
        samples_of: Callable[[Any], int] = batch_samples,
        on_step: Callable[[WatchedLoop], None] | None = None,
    ) -> None:
        self.loader = loader
        self.label = label
        self.samples_of = samples_of
        self.on_step = on_step
        self.waits: list[float] = []
        self.steps: list[float] = []
        self.samples: list[int] = []
        self.step_cpu_s = 0.0
        self.first_batch_s: float | None = None
        self.first_samples = 0
        self.facts: LoaderFacts | None = None
        self.ended = "running"
        self._usage: TreeUsage | None = None
        self._gpu: GpuUtilization | None = None
        self._cpus = frozenset(os.sched_getaffinity(0))
        self._busy_from = (0.0, 0.0)  # (busy CPU of this process's cores, wall) at the start
        self._back = self._got = self._cpu_from = 0.0

    @property
    def steps_done(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Any]:
        try:
            self.start()
            for batch in self.loader:
                self.arrived(batch)
                yield batch
                self.stepped()
            self.ended = "epoch"
        except GeneratorExit:
            self.ended = "stopped"  # a `break` in the user's loop, or the generator dropped
            raise
        except BaseException:
            self.ended = "error"
            raise
        finally:
            self.stop()

    # The loop's events, for a loop driven from outside (a training framework's callbacks):
    # start() before the loader is asked for its first batch, arrived(batch) when a batch
    # reaches the step, stepped() when the step ends, stop() at the end. A framework that shows
    # the batch only inside the step (the Trainer's model forward) calls arrived(None), then
    # seen(batch) for each batch of the step; resumed() ends the framework's own work after a
    # step (logging, evaluating, saving), which is then no part of the next batch's wait.

    def start(self) -> None:
        self.ended = "running"
        usage, gpu = TreeUsage(), GpuUtilization()
        self._usage, self._gpu = usage.__enter__(), gpu.__enter__()
        self._busy_from = (busy_cpu_s(self._cpus), time.monotonic())
        self._back = time.perf_counter()  # the first batch is waited for from here

    def arrived(self, batch: Any) -> None:
        now = time.perf_counter()
        if self.first_batch_s is None:
            self.first_batch_s = now - self._back
            if batch is not None:
                self.seen(batch)
        else:
            self.waits.append(now - self._back)
            self.samples.append(0 if batch is None else self.samples_of(batch))
        self._got, self._cpu_from = now, time.thread_time()

    def seen(self, batch: Any) -> None:
        """A batch of the step under way: its samples count to the step, and the first batch
        tells the loader's facts."""
        if self.facts is None:
            self.facts = LoaderFacts.of(self.loader, batch)
        if self.samples:
            self.samples[-1] += self.samples_of(batch)
        else:
            self.first_samples += self.samples_of(batch)

    def resumed(self) -> None:
        """The framework's own work after a step ended now: the next wait is timed from here."""
        self._back = time.perf_counter()

    def stepped(self) -> None:
        now = time.perf_counter()
        self.step_cpu_s += time.thread_time() - self._cpu_from
        if len(self.waits) > len(self.steps):  # the first batch's step has no wait to pair
            self.steps.append(now - self._got)
            if self.on_step is not None:
                self.on_step(self)
        self._back = now

    def stop(self, ended: str | None = None) -> None:
        if ended is not None:
            self.ended = ended
        if self._gpu is not None:
            self._gpu.__exit__(None, None, None)
        if self._usage is not None:
            self._usage.__exit__(None, None, None)

    def others_cores(self) -> float | None:
        """Cores that other work (not this process tree) kept busy over the loop, on the cores
        this process may use: their busy CPU less the tree's, over the wall time."""
        usage, (busy, started) = self._usage, self._busy_from
        elapsed = time.monotonic() - started
        if usage is None or elapsed <= 0.5:
            return None
        return max(busy_cpu_s(self._cpus) - busy - usage.cpu_s, 0.0) / elapsed

    def run(self) -> LoopRun:
        """The loop so far: a batch's wait and the step after it, for every completed step."""
        done = min(len(self.waits), len(self.steps))
        usage = self._usage
        return LoopRun(
            label=self.label,
            time_to_first_batch_s=self.first_batch_s or 0.0,
            first_batch_samples=self.first_samples,
            wait_s=tuple(self.waits[:done]),
            step_s=tuple(self.steps[:done]),
            samples=tuple(self.samples[:done]),
            ended=self.ended,
            cpu_s=usage.cpu_s if usage is not None else 0.0,
            peak_rss_bytes=usage.peak_rss_bytes if usage is not None else 0,
            gpu_utilization=tuple(self._gpu.samples) if self._gpu is not None else (),
            step_cpu_s=self.step_cpu_s,
        )

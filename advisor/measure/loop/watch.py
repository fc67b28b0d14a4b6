"""The user's own training loop, watched: `WatchedLoop` wraps the loader the user trains with and
records, per step, how long the loop waited for its batch and how long the rest of the step
took, as the same `LoopRun` that `diagnose`'s loop records, so both are judged alike.

The loop is the user's: `for batch in watched: ...` yields the loader's batches unchanged, in
their order. Per step it reads two clocks (the wall clock and this thread's CPU clock) and
appends three numbers, as every loop that measures a loader does (`InstrumentedLoop`).
`LoaderFacts` reads what the loader's settings and its first batch say about it (workers,
prefetch, pinning, persistent workers, the tensors and bytes that cross from a worker per batch,
the data set's shards) and what the machine allows (`/dev/shm`, the open-file limit).
"""

from __future__ import annotations

import functools
import resource
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from advisor.measure.loop.handover import Handover, measure_handover
from advisor.measure.loop.instrument import InstrumentedLoop, batch_samples
from advisor.measure.loop.results import LoopRun
from native_loader.shm_plan import shm_free_bytes


@dataclass(frozen=True)
class LoaderFacts:
    """What the loader's settings and first batch say, and what the machine allows.

    num_workers: None where the loader is no DataLoader (read in the training process; it has
        no workers to change).
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
            shm_free_bytes=shm_free_bytes(shm_path),
            open_files_limit=None if soft == resource.RLIM_INFINITY else int(soft),
        )

    @property
    def loading_workers(self) -> int:
        """The processes that load besides the training process: a DataLoader's workers; any
        other iterable is read in the training process, as a DataLoader with 0 workers is."""
        return self.num_workers or 0

    def handover(self) -> Handover | None:
        """What a batch of the loader's tensors costs to cross from a worker (`measure_handover`,
        a few hundredths of a second for 100 tensors), measured once in this process for each
        count of tensors, so that every front judges a loop by the same figure; None for a
        loader that is no DataLoader (it has no workers to hand over from)."""
        return None if self.num_workers is None else _handover(self.tensors_per_batch)


@functools.cache
def _handover(tensors: int) -> Handover | None:
    return measure_handover(tensors)


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


class WatchedLoop(InstrumentedLoop):
    """`for batch in WatchedLoop(loader): ...`: the loader's batches, each step timed by the one
    instrumented loop (`InstrumentedLoop`), driven from the user's loop.

    `on_step(self)` is called after each step's timing is recorded (the front's summary lines
    and live view); `run()` is the loop so far as a `LoopRun`, at any time, also after it ended.
    A training framework's callbacks drive it with the loop's events (`InstrumentedLoop`); one
    that shows the batch only inside the step (the Trainer's model forward) calls
    arrived(None), then seen(batch) for each batch of the step.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        *,
        label: str = "your loader",
        samples_of: Callable[[Any], int] = batch_samples,
        on_step: Callable[[WatchedLoop], None] | None = None,
    ) -> None:
        super().__init__(samples_of)
        self.loader = loader
        self.label = label
        self.on_step = on_step
        self.facts: LoaderFacts | None = None
        self._handover: Handover | None = None
        self.ended = "running"
        self._stopped = False

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

    def start(self) -> None:
        self.ended = "running"
        self._stopped = False
        super().start()

    def seen(self, batch: Any) -> None:
        """A batch of the step under way: its samples count to the step, and the first batch
        tells the loader's facts."""
        if self.facts is None:
            self.facts = LoaderFacts.of(self.loader, batch)
        super().seen(batch)

    def stepped(self) -> bool:
        counted = super().stepped()
        if counted and self.on_step is not None:
            self.on_step(self)
        return counted

    def stop(self, ended: str | None = None) -> None:
        if ended is not None:
            self.ended = ended
        if not self._stopped and self.started_at:
            self._stopped = True
            super().stop()

    def handover(self) -> Handover | None:
        """What a batch of the loader's tensors costs to cross from a worker
        (`LoaderFacts.handover`), measured once when first asked: at a report, not in the
        loop; None before the first batch, and for a loader that is no DataLoader."""
        if self._handover is None and self.facts is not None:
            self._handover = self.facts.handover()
        return self._handover

    def run(self) -> LoopRun:
        """The loop so far: a batch's wait and the step after it, for every completed step."""
        return self.record(self.label, self.ended)

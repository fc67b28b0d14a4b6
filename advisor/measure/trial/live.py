"""What a slice of the training-loop measurement runs: a DataLoader kept alive between slices
(`LiveLoader`), and the spinning step (`spin_step`), as CUDA's default synchronisation costs
the host. The measurement itself is `advisor.measure.trial.sweep`."""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from advisor.measure.trial.data import TrialData
from advisor.measure.trial.steady import EpochStarts, StageGauge
from native_loader.loader import LoaderSettings, make_dataloader

CYCLE_OBJECTS = 20_000  # the loaders cycle a small sample up to this many objects
BATCH_TIMEOUT_S = 60.0  # a worker batch slower than this ends the measurement (DataLoader timeout)


def spin_step(seconds: float) -> None:
    """A step as CUDA's default spin-wait on synchronisation costs the host: the training thread
    keeps its core busy until the step ends, with the GIL released.

    `torch.cuda.synchronize` releases the GIL before it spins (THCPModule_cudaSynchronize holds
    a `pybind11::gil_scoped_release` around `c10::cuda::device_synchronize`), as the generated
    tensor methods behind `.item()` and `.cpu()` do: the process's other threads (the reader's,
    the pin-memory thread) run meanwhile. `os.sched_yield()` releases the GIL on every turn and
    returns at once when no other thread waits for this core, so the thread stays on its core
    as the driver's spin does. `time.sleep(0)` would not: on Linux it is a `clock_nanosleep`
    that parks the thread for the timer slack (about 50 us) on every turn, so the "spinning"
    thread held a quarter of a core (measured here: 0.24). A plain busy loop would hold the GIL
    for a switch interval at a time, which no GPU step does. The spin stays in the training
    thread: a step spun elsewhere while this thread slept would hand the core back late (a
    woken thread waits for a core that the loader's processes hold, some milliseconds a batch
    on a busy machine), which the training thread never does.
    """
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        os.sched_yield()


class LiveLoader:
    """A DataLoader over `data` with persistent workers, kept iterating between slices (what a
    training loop's loader does between epochs' batches). Built by the runtime's factory
    (`native_loader.loader.make_dataloader`) with the settings the export writes."""

    def __init__(
        self,
        data: TrialData,
        batch_size: int,
        workers: int,
        pin: bool,
        batch_timeout_s: float = BATCH_TIMEOUT_S,
        prefetch: int | None = None,
    ) -> None:
        # A batch of `batch_size` samples: fewer items where one item holds many (a text shard).
        self.samples_per_item = data.samples_per_item
        self.settings = LoaderSettings(
            batch_size=data.items_per_batch(batch_size), num_workers=workers, pin_memory=pin,
            prefetch_factor=prefetch if workers > 0 else None,
        )  # fmt: skip
        self.workers = workers
        self.batch_size = batch_size
        self.pin = pin
        self.prefetch = self.settings.dataloader_kwargs(cuda_available=True).get("prefetch_factor")
        self.stages = StageGauge(max(workers, 1))
        dataset = data.dataset(data.transform, min_objects=CYCLE_OBJECTS)
        self.loader: torch.utils.data.DataLoader[Any] = make_dataloader(
            self.stages.publishing(dataset),
            self.settings,
            multiprocessing_context="fork" if workers > 0 else None,
            # a batch that never comes must not hold the trial far past its budget
            timeout=batch_timeout_s if workers > 0 else 0,
        )
        self._iterator: Any = None
        # training samples in one epoch (learned at the first epoch's end where the objects are
        # streamed), and delivered so far in this one
        self.epoch_samples = data.epoch_samples(CYCLE_OBJECTS)
        self._in_epoch = 0.0

    def samples_in(self, batch: Any) -> int:
        """Training samples in a batch of items."""
        return round(len(batch) * self.samples_per_item)

    def produced_samples(self) -> float:
        """Training samples the loader's processes have produced so far (`StageGauge`)."""
        return self.stages.read() * self.samples_per_item

    def next_batch(self) -> Any:
        """The next batch; TimeoutError when the workers took longer than the batch timeout."""
        if self._iterator is None:
            self._iterator = iter(self.loader)
        try:
            try:
                batch = next(self._iterator)
            except StopIteration:  # the epoch ended: a new one
                self.epoch_samples = self.epoch_samples or self._in_epoch
                self._in_epoch = 0.0
                self._iterator = iter(self.loader)
                batch = next(self._iterator)
        except RuntimeError as exc:
            if "timed out" not in str(exc):
                raise
            raise TimeoutError(
                f"num_workers={self.workers}: a batch took over {self.loader.timeout:.0f} s"
            ) from exc
        self._in_epoch += self.samples_in(batch)
        return batch

    def epoch_starts(self) -> EpochStarts:
        """The epochs the loader's processes have started, and their first items' waits."""
        return self.stages.epoch_starts()

    def finishing_epoch(self) -> bool:
        """True when what is left of this epoch is no more than the DataLoader's prefetch queue
        and the batch each process is filling hold: the processes have nothing left to make."""
        if self.epoch_samples is None:
            return False
        queued = max(self.workers, 1) * ((self.prefetch or 0) + 1) * self.settings.batch_size
        return self.epoch_samples - self._in_epoch <= queued * self.samples_per_item

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        del iterator

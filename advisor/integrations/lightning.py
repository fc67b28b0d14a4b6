"""`WatchCallback` for Lightning (`lightning.pytorch`, or the older `pytorch_lightning`):

    trainer = Trainer(callbacks=[WatchCallback()])

Each training epoch is watched as `for batch in advisor.watch(loader)` watches a loop: a line
every `every` steps, the report (verdict, bottleneck, one change, what the loader trips over)
at the epoch's end; `callback.reports` keeps one per epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback

from advisor.decide.judge import MIN_STEPS, JudgedLoop
from advisor.measure.loop.watch import WatchedLoop
from advisor.watcher import AUTO, Doctor

__all__ = ["WatchCallback"]


class WatchCallback(Callback):
    def __init__(
        self,
        every: int = 50,
        out: Callable[[str], None] | str | None = AUTO,
        min_steps: int = MIN_STEPS,
    ) -> None:
        self.doctor = Doctor(
            every=every, out=out, label="the trainer's train loader", min_steps=min_steps
        )
        self.loop: WatchedLoop | None = None
        self.reports: list[JudgedLoop] = []

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.loop = WatchedLoop(
            trainer.train_dataloader, label=self.doctor.label, on_step=self.doctor.step
        )
        self.loop.start()

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.loop is not None:
            self.loop.arrived(batch)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.loop is not None:
            self.loop.stepped()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._end("epoch")

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._end("error")

    def _end(self, ended: str) -> None:
        if self.loop is None:
            return
        loop, self.loop = self.loop, None
        loop.stop(ended)
        self.reports.append(self.doctor.finish(loop))

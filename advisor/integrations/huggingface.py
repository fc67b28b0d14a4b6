"""`WatchCallback` for the Hugging Face `transformers.Trainer`:

    trainer = Trainer(model, args, train_dataset=data, callbacks=[WatchCallback()])

Each training epoch is watched as `for batch in advisor.watch(loader)` watches a loop: a line
every `every` optimizer steps, the report (verdict, bottleneck, one change, what the loader
trips over) at the epoch's end; `callback.reports` keeps one per epoch.

Where the Trainer calls its callbacks (`Trainer._run_epoch`): it takes the batches of one
optimizer step (`gradient_accumulation_steps` of them) from the train loader, then calls
`on_step_begin`, runs the forward and backward passes and the optimizer, calls `on_step_end`, and
then logs, evaluates and saves where due, each ending in `on_log`, `on_evaluate` or `on_save`.
So a step's wait is timed from the last of those events (or `on_epoch_begin`) to
`on_step_begin`: the loader's fetch, with the Trainer's logging, evaluation and checkpoints left
out; the step from `on_step_begin` to `on_step_end`. The callbacks are not handed the batch:
a forward pre-hook on the model reads each training forward's inputs for the step's samples and
the batch's tensors (a `compute_loss` that never calls the model with the batch leaves the
step counted as `per_device_train_batch_size` x `gradient_accumulation_steps`).

The Trainer has no event for an exception in its loop: an epoch that raised is reported (as an
error) by the next `train()`'s start, or by `callback.close()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers import TrainerCallback

from advisor.decide.judge import MIN_STEPS, JudgedLoop
from advisor.measure.loop.watch import WatchedLoop
from advisor.watcher import AUTO, Doctor

__all__ = ["WatchCallback"]


class WatchCallback(TrainerCallback):
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
        self._hook: torch.utils.hooks.RemovableHandle | None = None
        self._in_step = False
        self._seen = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.close()  # an earlier train() that raised left its epoch open
        model = kwargs.get("model")
        if isinstance(model, torch.nn.Module):
            self._hook = model.register_forward_pre_hook(self._forward, with_kwargs=True)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.loop = WatchedLoop(
            kwargs["train_dataloader"], label=self.doctor.label, on_step=self.doctor.step
        )
        self.loop.start()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.loop is not None:
            self.loop.arrived(None)
            self._in_step, self._seen = True, 0

    def _forward(self, module: torch.nn.Module, inputs: Any, kw: dict[str, Any]) -> None:
        if self._in_step and module.training and self.loop is not None:
            self.loop.seen(kw if kw else inputs)
            self._seen += 1

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.loop is None or not self._in_step:
            return
        self._in_step = False
        if not self._seen:  # no forward with the batch: the step as the arguments size it
            self.loop.seen(
                [None] * (args.per_device_train_batch_size * args.gradient_accumulation_steps)
            )
        self.loop.stepped()

    def _resumed(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.loop is not None and not self._in_step:
            self.loop.resumed()

    on_log = on_evaluate = on_save = _resumed

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end("epoch")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end("epoch")
        self._unhook()

    def close(self) -> None:
        """End an epoch left open by an exception in the Trainer's loop (reported as an error),
        and take the hook off the model."""
        self._end("error")
        self._unhook()

    def _unhook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _end(self, ended: str) -> None:
        self._in_step = False
        if self.loop is None:
            return
        loop, self.loop = self.loop, None
        loop.stop(ended)
        self.reports.append(self.doctor.finish(loop))

"""`advisor.watch` as the Hugging Face `Trainer`'s callback, in a real Trainer's loop (installed
by the test extra): a few-parameter torch model, an in-memory data set, the CPU."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset


def _transformers() -> Any:
    """transformers, imported by the test that runs it: at collection it cost each of the
    suite's collecting processes 0.8 s (skips the test where the extra is not installed)."""
    return pytest.importorskip("transformers")


LOAD_S, STEP_S, BATCH = 0.003, 0.005, 8


class Slow(Dataset):  # type: ignore[type-arg]
    """Each sample waits 3 ms (I/O-like), as the Trainer's default collator takes it: a dict."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        time.sleep(LOAD_S)
        return {"x": torch.randn(8), "labels": torch.randn(1)}


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        time.sleep(STEP_S)  # a step of 5 ms beside the model's own work
        out = self.layer(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


def _watch_callback() -> Any:
    _transformers()
    from advisor.integrations.huggingface import WatchCallback

    return WatchCallback


def _slow_logging() -> Any:
    """A callback making the Trainer's own work between steps slow: 1 s at every log before
    the last step."""

    class SlowLogging(_transformers().TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step < state.max_steps:
                time.sleep(1.0)

    return SlowLogging()


def _trainer(tmp: Any, callbacks: list[Any], **args: Any) -> Any:
    transformers = _transformers()
    arguments = transformers.TrainingArguments(
        output_dir=str(tmp), per_device_train_batch_size=BATCH, use_cpu=True, report_to=[],
        save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, **args,
    )  # fmt: skip
    return transformers.Trainer(
        model=Tiny(), args=arguments, train_dataset=Slow(160), callbacks=callbacks
    )


@pytest.mark.timeout(60)  # two epochs of 20 steps take about 2 s
def test_the_trainer_callback_watches_every_epoch_and_reports(tmp_path: Any) -> None:
    WatchCallback = _watch_callback()

    lines: list[str] = []
    callback = WatchCallback(every=10, out=lines.append, min_steps=10)
    trainer = _trainer(tmp_path, [callback], num_train_epochs=2, logging_strategy="no")
    trainer.train()
    assert len(callback.reports) == 2  # one per epoch
    for report in callback.reports:
        summary = report.summary
        assert summary.batches == 20 and summary.samples == 160 and summary.ended == "epoch"
        # 24 ms of loading per 8 samples against a 5 ms step: most of each step waits
        assert report.verdict is not None and report.verdict.input_bound
        assert summary.overall_wait_share is not None and summary.overall_wait_share > 0.6
        assert report.bottleneck is not None and report.change is not None
        assert report.change.setting == "num_workers" and report.change.to > 0
        assert report.facts is not None and report.facts.num_workers == 0
        assert report.facts.tensors_per_batch == 2  # the collated dict: x and labels
    # the first epoch's report gave its verdict: the second epoch gets one line
    assert sum("step 10:" in line for line in lines) == 1
    assert lines[-1].startswith("advisor.watch: epoch 2: ") and "of each step" in lines[-1]
    assert any(line.startswith("advisor.watch: change: num_workers 0 ->") for line in lines)
    assert callback._hook is None  # the model's forward hook is off after train()


@pytest.mark.timeout(60)
def test_the_trainers_own_work_is_no_data_wait_and_accumulated_batches_count(
    tmp_path: Any,
) -> None:
    """Two batches per optimizer step; a log after step 4 that takes 1 s is left out of the
    wait, which stays the loader's 2 x 24 ms (on a busy machine, each of the 16 samples' sleeps
    may wait its turn for a core: up to some 0.4 s)."""
    WatchCallback = _watch_callback()

    callback = WatchCallback(out=None, min_steps=5)
    trainer = _trainer(
        tmp_path, [_slow_logging(), callback], max_steps=8, gradient_accumulation_steps=2,
        logging_strategy="steps", logging_steps=4,
    )  # fmt: skip
    trainer.train()
    (report,) = callback.reports
    summary = report.summary
    assert summary.batches == 8 and summary.samples == 8 * 2 * BATCH
    assert summary.wait_per_batch_s is not None
    assert summary.wait_per_batch_s.high < 0.7, summary.wait_per_batch_s
    # accelerate reads one batch ahead (the last step finds its batch there): the median
    assert summary.wait_per_batch_s.median > 2 * BATCH * LOAD_S * 0.9


class Failing(Slow):
    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if i == 100:
            raise ValueError("the loader's own error")
        return super().__getitem__(i)


@pytest.mark.timeout(60)
def test_an_epoch_the_trainer_left_by_an_exception_is_reported_as_an_error(tmp_path: Any) -> None:
    """The Trainer calls no callback on an exception: `close()` (or the next train()) ends the
    epoch's watch and takes the hook off the model."""
    WatchCallback = _watch_callback()

    callback = WatchCallback(out=None, min_steps=5)
    trainer = _trainer(tmp_path, [callback], num_train_epochs=1, logging_strategy="no")
    trainer.train_dataset = Failing(160)
    with pytest.raises(ValueError, match="the loader's own"):
        trainer.train()
    assert callback.loop is not None and not callback.reports
    callback.close()
    (report,) = callback.reports
    # the Trainer shuffles: the failing sample ends the epoch somewhere before its end
    assert report.summary.ended == "error" and 0 < report.summary.batches < 160 // BATCH
    assert callback.loop is None and callback._hook is None

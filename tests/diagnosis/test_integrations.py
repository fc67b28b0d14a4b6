"""`advisor.watch` as the training frameworks' callbacks, in their real loops: Lightning's
Trainer here (installed by the test extra); and nothing imports a framework by itself."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):  # type: ignore[type-arg]
    """Each sample waits 3 ms (I/O-like)."""

    def __len__(self) -> int:
        return 320

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.003)
        return torch.randn(8), torch.randn(1)


def _tiny(pl: Any) -> Any:
    """A LightningModule whose step takes 5 ms beside its model's work; Lightning is imported by
    the test that runs it (3-5 s on 2 cores: every process that collects the suite would pay)."""

    class Tiny(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(
            self, batch: tuple[torch.Tensor, torch.Tensor], index: int
        ) -> torch.Tensor:
            x, y = batch
            time.sleep(0.005)  # a step of 5 ms beside the model's own work
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny()


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")  # Lightning's own
def test_the_lightning_callback_watches_every_epoch_and_reports() -> None:
    pl = pytest.importorskip("pytorch_lightning")
    from advisor.integrations.lightning import WatchCallback

    lines: list[str] = []
    callback = WatchCallback(every=10, out=lines.append, min_steps=10)
    trainer = pl.Trainer(
        max_epochs=2, accelerator="cpu", callbacks=[callback], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(_tiny(pl), DataLoader(Slow(), batch_size=8))
    assert len(callback.reports) == 2  # one per epoch
    for report in callback.reports:
        assert report.summary.batches == 40 and report.verdict is not None
        assert report.verdict.input_bound  # 24 ms of loading per 8 samples against a 5 ms step
        assert report.bottleneck is not None and report.change is not None
        assert report.change.setting == "num_workers" and report.change.to > 0
    # the first epoch's report gave its verdict: the second epoch gets one line
    assert sum("step 10:" in line for line in lines) == 1
    assert lines[-1].startswith("advisor.watch: epoch 2: ") and "of each step" in lines[-1]
    assert any(line.startswith("advisor.watch: change: num_workers 0 ->") for line in lines)


def test_nothing_imports_a_training_framework_by_itself() -> None:
    code = (
        "import sys, advisor, advisor.watcher, advisor.integrations; advisor.watch([1]);"
        "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

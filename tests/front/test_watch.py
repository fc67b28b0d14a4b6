"""`advisor.watch`: the user's own loop, watched with real DataLoaders (no stand-in step).

Known causes are injected into plain PyTorch loops (latency in `__getitem__`, a transform that
holds the GIL, 100-tensor batches, fewer shards than workers, workers that start slowly every
epoch, a small /dev/shm); watch must name each, and where it proposes more workers, the rate it
predicts must be within 20% of the rate the changed loader then reads in the same loop.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import time
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

import advisor
from advisor import watcher
from advisor.decide.judge import judge
from advisor.measure.hardware.host import child_pids
from advisor.report.watch import watch_lines
from bench.watch_check import Burning, Sleepy

STEP_S = 0.01


class Failing(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 3:
            raise ValueError("the loader's own error")
        return torch.zeros(1)


def _as_list(samples: list[Any]) -> list[Any]:
    """No collation: a batch of 4 samples of 25 tensors crosses as 100 tensors."""
    return samples


def _train(loader: Any, lines: list[str] | None = None, every: int = 10_000) -> Any:
    watched = advisor.watch(loader, every=every, out=None if lines is None else lines.append)
    for _ in watched:
        time.sleep(STEP_S)
    return watched.report()


def test_the_loop_gets_the_same_batches_in_order_and_a_line_every_n_steps() -> None:
    data = TensorDataset(torch.arange(300))
    lines: list[str] = []
    seen = []
    for (batch,) in advisor.watch(DataLoader(data, batch_size=4), every=25, out=lines.append):
        seen += batch.tolist()
    assert seen == list(range(300))
    steps = [line for line in lines if ": step " in line]
    assert [line.split("step ")[1].split(":")[0] for line in steps] == ["25", "50"]
    assert all("of each step" in line for line in steps)
    assert any(
        line.endswith("first batch after " + line.split("after ")[-1]) and "75 steps" in line
        for line in lines
    )  # the report at the end: 300 / 4 batches, the first apart


def test_a_script_gets_one_line_an_epoch_after_the_first_report() -> None:
    """Outside a notebook: a line every `every` steps and the report in the first epoch, then
    one line an epoch (an epoch's verdict, waiting share and rate), not the report again."""
    loader = DataLoader(TensorDataset(torch.arange(240)), batch_size=8)  # 30 batches an epoch
    lines: list[str] = []
    watched = advisor.watch(loader, every=10, out=lines.append, min_steps=10)
    counts = []
    for _ in range(6):
        for _batch in watched:
            time.sleep(0.002)
        counts.append(len(lines))
    first = watched.reports[0]
    assert first.verdict is not None
    assert counts[0] == 2 + len(watch_lines(first))  # steps 10 and 20, then the report
    assert [b - a for a, b in itertools.pairwise(counts)] == [1] * 5, lines
    for epoch, line in enumerate(lines[counts[0] :], start=2):
        assert line.startswith(f"advisor.watch: epoch {epoch}: "), line
        assert "of each step" in line and line.endswith("over its 30 steps")


def test_the_live_view_starts_at_the_first_step_and_counts_on_across_the_swap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a notebook, the chart's first point is the first step, each epoch's last steps are on
    it before the advised loader is swapped in, the swap is marked between the epochs, and the
    steps count on across it."""
    monkeypatch.setattr(watcher, "_in_notebook", lambda: True)

    def make_loader(num_workers: int = 0) -> DataLoader:  # type: ignore[type-arg]
        return DataLoader(Sleepy(160, 0.004), batch_size=8, num_workers=num_workers)

    watched = advisor.watch(make_loader, every=10, min_steps=10)
    for _ in range(2):
        for _batch in watched:
            time.sleep(STEP_S)
    change = watched.swapped
    assert change is not None, watched.reports[0]
    view = watched.doctor.view
    figure = view.figure()
    steps = list(figure.data[0].x)
    # the first epoch's 19 steps, then the advised loader's 19 (its first batch is no step)
    assert steps == [1, 10, 19, 20, 30, 38], steps
    marks = [shape.x0 for shape in figure.layout.shapes if shape.x0 == shape.x1]
    assert marks == [19.5]
    said = [a.text for a in figure.layout.annotations]
    assert f"swapped: num_workers 0 -> {change.to}" in said, said
    assert "<li>20 steps since the swap, " in view.details.value  # the advised loader's 20 batches


def test_a_break_or_an_exception_ends_it_cleanly_and_stops_the_workers() -> None:
    before = child_pids()
    loader = DataLoader(TensorDataset(torch.arange(400)), batch_size=4, num_workers=2)
    watched = advisor.watch(loader, out=None)
    for index, _ in enumerate(watched):
        if index == 30:
            break
    assert watched.report().summary.ended == "stopped"
    with pytest.raises(ValueError, match="the user's own"):
        for _ in (mine := advisor.watch(loader, out=None)):
            raise ValueError("the user's own error")
    assert mine.report().summary.ended == "stopped"  # as a break: the loop left it
    with pytest.raises(ValueError, match="the loader's own"):
        for _ in (erring := advisor.watch(DataLoader(Failing(), num_workers=0), out=None)):
            pass
    assert erring.report().summary.ended == "error"
    gc.collect()
    deadline = time.monotonic() + 10
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "the DataLoader's workers outlived the watch"


def test_watch_refuses_what_it_cannot_iterate() -> None:
    with pytest.raises(TypeError, match="the loader you iterate"):
        advisor.watch(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every=0"):
        advisor.watch([], every=0)


@pytest.mark.timing
@pytest.mark.parametrize("dataset", [Sleepy(400, 0.004), Burning(400, 0.004)], ids=type)
def test_more_workers_read_what_watch_predicted(dataset: Dataset) -> None:  # type: ignore[type-arg]
    """0 workers, a 10 ms step per 8 samples (800 samples/s): the loop waits; watch proposes
    more workers and the rate the model gives them, which the changed loader then reads."""
    report = _train(DataLoader(dataset, batch_size=8))
    assert report.verdict is not None and report.verdict.input_bound
    change = report.change
    assert change is not None and change.setting == "num_workers" and change.to > 0
    before = report.summary.overall_samples_per_s
    after = _train(DataLoader(dataset, batch_size=8, num_workers=change.to))
    measured = after.summary.overall_samples_per_s
    predicted_gain, measured_gain = change.predicted_samples_per_s / before, measured / before
    assert measured_gain > 1.3, (before, measured)
    assert abs(predicted_gain / measured_gain - 1) <= 0.2, (change, before, measured)


@pytest.mark.timing
def test_what_users_trip_over_is_named() -> None:
    class Many(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> list[torch.Tensor]:
            return [torch.zeros(4) for _ in range(25)]

    class OneShard(IterableDataset):  # type: ignore[type-arg]
        n_shards = 1

        def __iter__(self) -> Any:
            info = torch.utils.data.get_worker_info()
            if info is None or info.id == 0:  # the one shard goes to worker 0
                yield from (torch.tensor(i) for i in range(40))

    def slow_start(_: int) -> None:
        time.sleep(0.5)

    many = _train(
        DataLoader(
            Many(), batch_size=4, num_workers=1, worker_init_fn=slow_start, collate_fn=_as_list
        )
    )
    causes = {trip.cause: trip.line for trip in many.trips}
    assert "100 tensors" in causes["boundary"]
    assert "persistent_workers=False" in causes["restart"]
    shards = _train(DataLoader(OneShard(), batch_size=4, num_workers=2))
    assert (
        "1 shard for 2 workers: 1 worker get" in {t.cause: t.line for t in shards.trips}["shards"]
    )
    # a container's 64 MiB /dev/shm against 2 workers x 2 batches of 20 MiB
    watched = advisor.watch(
        DataLoader(Many(), batch_size=4, num_workers=2, collate_fn=_as_list), out=None
    )
    for _ in watched:
        pass
    assert watched.loop.facts is not None
    small = dataclasses.replace(
        watched.loop.facts, shm_free_bytes=64 * 2**20, batch_bytes=20 * 2**20
    )
    report = judge(watched.loop.run(), small, usable_cores=2)
    assert "bus error" in {t.cause: t.line for t in report.trips}["shm"]


@pytest.mark.timing
def test_no_workers_are_offered_for_batches_that_cost_more_to_hand_over_than_to_make() -> None:
    """100 tensors a batch, each sample waiting 1 ms in the training process: the loop waits
    over 40% of each step, but with workers each tensor would cross on its own, which costs the
    training thread more than the loading it would save, so no change is offered."""

    class Many(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 400

        def __getitem__(self, i: int) -> list[torch.Tensor]:
            time.sleep(0.001)
            return [torch.zeros(16) for _ in range(25)]

    watched = advisor.watch(DataLoader(Many(), batch_size=4, collate_fn=_as_list), out=None)
    for _ in watched:
        time.sleep(0.005)
    report = watched.report()
    assert report.summary.overall_wait_share is not None
    assert report.summary.overall_wait_share > 0.2, report.summary  # the loop does wait
    handover = watched.loop.handover()
    assert handover is not None and handover.tensors == 100
    assert report.change is None, report.change


@pytest.mark.timing
def test_the_advised_loader_is_swapped_in_at_the_epochs_end_and_proven_in_the_same_run() -> None:
    """Given the function that makes the loader, watch makes the advised one at the end of the
    first epoch; the next epochs read it (the same batches in the same order) and the report
    puts the prediction beside the rates measured before and after, in this one run."""
    dataset = Sleepy(160, 0.004)
    made: list[int] = []

    def make_loader(num_workers: int = 0) -> DataLoader:  # type: ignore[type-arg]
        made.append(num_workers)
        return DataLoader(dataset, batch_size=8, num_workers=num_workers)

    lines: list[str] = []
    watched = advisor.watch(make_loader, every=10, out=lines.append, min_steps=10)
    for _ in range(3):
        seen: list[int] = []
        for batch in watched:
            time.sleep(STEP_S)
            seen += batch[:, 0].tolist()
        assert seen == list(range(160))
    first, second, third = watched.reports
    change = first.change
    assert first.proof is None and change is not None and change.setting == "num_workers"
    assert made == [0, change.to] and change.to > 0  # swapped in once
    assert second.facts is not None and second.facts.num_workers == change.to
    proof = second.proof
    assert proof is not None and proof.change == change
    assert proof.before_samples_per_s == first.summary.overall_samples_per_s
    assert proof.after_samples_per_s == second.summary.overall_samples_per_s
    assert proof.before_wait_share == first.summary.overall_wait_share
    assert proof.after_samples_per_s is not None and proof.after_wait_share is not None
    assert proof.after_samples_per_s > 1.3 * proof.before_samples_per_s
    assert proof.after_wait_share < proof.before_wait_share
    assert third.proof is not None and third.summary.batches == 2 * 20  # the after loader's
    assert any(f"make_loader(num_workers={change.to})" in line for line in lines)
    steps = [int(line.split("step ")[1].split(":")[0]) for line in lines if ": step " in line]
    assert steps == [10]  # the first epoch's 19 steps; one line an epoch after its report
    proved, last = lines[-2:]  # the epochs after the swap
    assert proved.startswith("advisor.watch: epoch 2: proof: num_workers 0 ->"), lines
    assert "x measured for" in proved and "predicted" in proved
    assert last.startswith("advisor.watch: epoch 3: ") and last.endswith("over its 20 steps")


@pytest.mark.timing
def test_workers_restarted_every_epoch_are_kept_and_gain_what_was_predicted() -> None:
    """2 workers that take 0.3 s to start, started anew for every epoch of 20 steps of 10 ms:
    watch advises persistent workers, swaps them in at the first epoch's end, and the epochs
    after read within 20% of the rate it predicted."""
    dataset = TensorDataset(torch.arange(160))
    made: list[bool] = []

    def slow_start(_: int) -> None:
        time.sleep(0.3)

    def make_loader(persistent_workers: bool = False) -> DataLoader:  # type: ignore[type-arg]
        made.append(persistent_workers)
        return DataLoader(
            dataset, batch_size=8, num_workers=2, worker_init_fn=slow_start,
            persistent_workers=persistent_workers,
        )  # fmt: skip

    watched = advisor.watch(make_loader, out=None, min_steps=10)
    for _ in range(4):
        for _batch in watched:
            time.sleep(STEP_S)
    change = watched.reports[0].change
    assert change is not None and change.setting == "persistent_workers", watched.reports[0]
    assert made == [False, True]
    assert "restart" in {trip.cause for trip in watched.reports[0].trips}
    assert "restart" not in {trip.cause for trip in watched.reports[-1].trips}
    proof = watched.reports[-1].proof
    assert proof is not None and proof.after_samples_per_s is not None
    measured_gain = proof.after_samples_per_s / proof.before_samples_per_s
    predicted_gain = change.predicted_samples_per_s / change.measured_samples_per_s
    assert measured_gain > 1.3, proof
    assert abs(predicted_gain / measured_gain - 1) <= 0.2, proof


def test_a_loader_function_named_by_module_that_cannot_take_the_change_is_kept(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_training.py").write_text(
        "import time, torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Sleepy(Dataset):\n"
        "    def __len__(self): return 120\n"
        "    def __getitem__(self, i): time.sleep(0.004); return torch.full((3,), i)\n"
        "def make_loader(): return DataLoader(Sleepy(), batch_size=8)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    lines: list[str] = []
    watched = advisor.watch("my_training:make_loader", every=10_000, out=lines.append, min_steps=5)
    for _ in range(2):
        for _batch in watched:
            time.sleep(STEP_S)
    assert watched.swapped is None and watched.reports[0].change is not None
    assert [r.summary.batches for r in watched.reports] == [15, 30]  # the same loader, on
    assert all(r.proof is None for r in watched.reports)
    assert sum("make_loader() takes no num_workers argument" in line for line in lines) == 1

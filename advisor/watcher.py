"""`advisor.watch(loader)` (module `advisor.watcher`): the doctor in your own training loop.

    for batch in advisor.watch(loader):
        train_step(batch)

Training runs unchanged: the same batches in the same order. Every `every` steps one line says
how much of each step waited for data over those steps; when the loop ends (the epoch, a
`break`, an exception) the report says the verdict, the bottleneck, one change with its
predicted effect, and what the loader's settings will trip over, as every front judges a loop
(`advisor.decide.judge`).
`Watch.report()` gives the same at any time.

Proof after: given the function that makes the loader instead (a callable, or its
"module:function"), `watch` calls it for the loader and, at the end of an epoch whose report
advises a change, calls it again with the change as a keyword argument
(`make_loader(num_workers=4)`) and iterates that loader from the next epoch on:

    watched = advisor.watch(make_loader)
    for epoch in range(epochs):
        for batch in watched:
            train_step(batch)

The report then puts the prediction beside the rate and waiting share measured before and
after the change, in the same run (`Proof`). The change is swapped in once.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from advisor.decide.history import LoopRecord, keep
from advisor.decide.judge import MIN_STEPS, JudgedLoop, judge
from advisor.decide.watching import Change, proof
from advisor.measure.hardware.host import usable_cores
from advisor.measure.loop.run import batch_samples
from advisor.measure.loop.watch import WatchedLoop
from advisor.report.watch import (
    epoch_line,
    no_swap_line,
    swap_line,
    watch_lines,
    window_line,
)

__all__ = ["Doctor", "Watch", "watch"]


AUTO = "auto"  # `out`'s default: lines outside a notebook, the live view in one


def _in_notebook() -> bool:
    """A Jupyter kernel with the wizard's tier installed (ipywidgets, plotly)."""
    try:
        from IPython import get_ipython

        import advisor.wizard.watchview  # noqa: F401
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class Doctor:
    """What the user sees of a watched loop, shared by `Watch` and the training frameworks'
    callbacks (`advisor.integrations`). In a notebook, the live view: a point at the first step
    (a swapped-in loader's too), every `every` steps and at each epoch's end, the swap marked.
    Elsewhere, lines: one every `every` steps and the report at each epoch's end until a report
    has given its verdict, then one line an epoch. The steps count on across the loops it is
    given (an epoch's, a swapped-in loader's)."""

    def __init__(
        self,
        *,
        every: int = 50,
        out: Callable[[str], None] | str | None = AUTO,
        label: str = "your loader",
        min_steps: int = MIN_STEPS,
    ) -> None:
        if every < 1 or min_steps < 1:
            raise ValueError(f"every={every} and min_steps={min_steps} must be at least 1")
        self.every, self.label, self.min_steps = every, label, min_steps
        self.view: Any = None
        if out == AUTO and _in_notebook():
            from advisor.wizard.watchview import WatchView

            self.view, out = WatchView(label, min_steps), None
        self.out: Callable[[str], None] | None = print if out == AUTO else out  # type: ignore[assignment]
        self.cores = usable_cores()
        self.before: tuple[Change, JudgedLoop] | None = None  # the change swapped in, and why
        self.epochs = 0  # the passes finished
        self.reported = False  # a report with a verdict was printed: one line an epoch on
        self._proved = False  # the proof was printed
        self._loop: WatchedLoop | None = None  # the loop whose steps are counted now
        self._steps_before = 0  # the steps of the loops before it
        self._shown_to = 0  # its steps up to the last point or line
        self._epoch_from = 0  # its steps before this epoch

    def report(self, loop: WatchedLoop) -> JudgedLoop:
        run = loop.run()
        report = judge(
            run, loop.facts, self.cores, min_steps=self.min_steps, handover=loop.handover()
        )
        if self.before is None:
            return report
        change, _ = self.before
        workers = loop.facts.num_workers if loop.facts is not None else None
        return dataclasses.replace(report, proof=proof(change, run, workers))

    def say(self, line: str) -> None:
        if self.out is not None:
            self.out(f"advisor.watch: {line}")

    def steps(self) -> int:
        """The run's steps so far, across the loops it was given."""
        return self._steps_before + (self._loop.steps_done if self._loop is not None else 0)

    def swapped(self, change: Change, report: JudgedLoop) -> None:
        """The loader changed by `change` (advised by `report`) reads from the next step on."""
        self.before = (change, report)
        if self.view is not None:
            self.view.swap(self.steps(), change)

    def step(self, loop: WatchedLoop) -> None:
        if self.out is None and self.view is None:
            return
        self._follow(loop)
        done = loop.steps_done
        first = self.view is not None and done == 1  # the chart starts at the first step
        if self.view is None and self.reported:  # a script past its first report
            return
        if first or (self._steps_before + done) % self.every == 0:
            self._show(loop, done)

    def finish(self, loop: WatchedLoop) -> JudgedLoop:
        report = self.report(loop)
        self.epochs += 1
        if self.out is None and self.view is None:
            return report
        self._follow(loop)
        done = loop.steps_done
        if self.view is not None:
            if done > self._shown_to:  # the epoch's last steps, before a swap among them
                self._show(loop, done)
            self.view.done(report)
        elif self.reported:
            window = _window(loop, self._epoch_from, done)
            said = report.proof if report.proof and report.proof.after_samples_per_s else None
            if window is not None:
                steps, waits, samples_per_s = window
                shown = None if self._proved else said
                self.say(epoch_line(self.epochs, waits, samples_per_s, steps, shown))
                self._proved = self._proved or said is not None
        else:
            for line in watch_lines(report):
                self.say(line)
            self.reported = report.verdict is not None
            self._proved = report.proof is not None and report.proof.after_samples_per_s is not None
        self._epoch_from = done
        return report

    def _follow(self, loop: WatchedLoop) -> None:
        """Count `loop`'s steps after those of the loops before it."""
        if loop is self._loop:
            return
        if self._loop is not None:
            self._steps_before += self._loop.steps_done
        self._loop, self._shown_to, self._epoch_from = loop, 0, 0

    def _show(self, loop: WatchedLoop, done: int) -> None:
        """A point on the live view, or a line, for the steps since the last."""
        window = _window(loop, self._shown_to, done)
        if window is None:
            return
        steps, waits, samples_per_s = window
        self._shown_to = done
        at = self._steps_before + done
        if self.view is not None:
            self.view.step(at, waits, samples_per_s)
        else:
            self.say(window_line(at, waits, samples_per_s, steps))


def _window(loop: WatchedLoop, start: int, end: int) -> tuple[int, float, float] | None:
    """The loop's steps `start` to `end`: their count, the share of their time that waited
    for data, and their samples/s; None where they took no time."""
    waited = sum(loop.waits[start:end])
    looped = waited + sum(loop.steps[start:end])
    if looped <= 0:
        return None
    return end - start, waited / looped, sum(loop.samples[start:end]) / looped


class Watch:
    """An iterable over the loader's batches that times each step (see `watch`); given the
    function that makes the loader, it swaps the advised loader in at an epoch's end."""

    def __init__(
        self,
        loader: Iterable[Any] | Callable[..., Iterable[Any]] | str,
        *,
        every: int = 50,
        out: Callable[[str], None] | str | None = AUTO,
        label: str = "your loader",
        min_steps: int = MIN_STEPS,
        samples_of: Callable[[Any], int] = batch_samples,
        history: bool = True,
    ) -> None:
        self.make: Callable[..., Iterable[Any]] | None = None
        self.history = history  # each pass's report kept in the run history
        self.loop_samples = samples_of
        if isinstance(loader, str):
            from advisor.cli.diagnose import load_object

            loader = load_object(loader, "loader")
        if callable(loader) and not isinstance(loader, Iterable):
            self.make, loader = loader, loader()
        if not isinstance(loader, Iterable):
            raise TypeError(f"watch() takes the loader you iterate, got {type(loader).__name__}")
        self.doctor = Doctor(every=every, out=out, label=label, min_steps=min_steps)
        self.loop = self._watched(loader)
        self.swapped: Change | None = None  # the change swapped in, once
        self.reports: list[JudgedLoop] = []  # one at the end of each pass over the loader

    def _watched(self, loader: Iterable[Any]) -> WatchedLoop:
        return WatchedLoop(
            loader, label=self.doctor.label, samples_of=self.loop_samples, on_step=self.doctor.step
        )

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self.loop
        finally:
            self.reports.append(self.doctor.finish(self.loop))
            if self.history:  # best effort: a history that cannot be written only warns
                keep(LoopRecord.of_watch(self.reports[-1], len(self.reports), self.doctor.label))
            if self.make is not None and self.swapped is None and self.loop.ended == "epoch":
                self._swap(self.make)

    def _swap(self, make: Callable[..., Iterable[Any]]) -> None:
        """The advised loader, made for the next epoch, where the report advises a change."""
        report = self.reports[-1]
        change = report.change
        if change is None:
            return
        name = getattr(make, "__name__", "the loader's function")
        try:
            inspect.signature(make).bind_partial(**{change.setting: change.to})
        except (TypeError, ValueError):
            self.make = None  # asked once
            self.doctor.say(no_swap_line(name, change))
            return
        self.loop = self._watched(make(**{change.setting: change.to}))
        self.swapped = change
        self.doctor.swapped(change, report)
        self.doctor.say(swap_line(name, change))

    def report(self) -> JudgedLoop:
        """The loop so far, judged."""
        return self.doctor.report(self.loop)


def watch(
    loader: Iterable[Any] | Callable[..., Iterable[Any]] | str,
    *,
    every: int = 50,
    out: Callable[[str], None] | str | None = AUTO,
    label: str = "your loader",
    min_steps: int = MIN_STEPS,
    history: bool = True,
) -> Watch:
    """Wrap the loader you train with: `for batch in advisor.watch(loader): ...`; or give the
    function that makes it (or its "module:function") to have the advised loader swapped in at
    the end of an epoch, and its effect measured in the same run.

    `every`: steps between summary lines (and live-view updates); `out`: where lines go (None:
    silent, read `.report()` instead; the default: printed, or in a notebook a live view of the
    waiting share with the verdict and the report); `min_steps`: steps before a verdict;
    `history`: keep each epoch's report in the run history (`python -m advisor history`)."""
    return Watch(loader, every=every, out=out, label=label, min_steps=min_steps, history=history)

"""`advisor.watch(loader)` (module `advisor.watcher`): the doctor in your own training loop.

    for batch in advisor.watch(loader):
        train_step(batch)

Training runs unchanged: the same batches in the same order. Every `every` steps one line says
how much of each step waited for data over those steps; when the loop ends (the epoch, a
`break`, an exception) the report says the verdict, the bottleneck, one change with its
predicted effect, and what the loader's settings will trip over (`advisor.decide.watching`).
`Watch.report()` gives the same at any time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from advisor.core.units import rate, share
from advisor.decide.watching import WatchReport, judge
from advisor.measure.hardware.host import usable_cores
from advisor.measure.loop.run import batch_samples
from advisor.measure.loop.watch import WatchedLoop

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
    """What the user sees of a watched loop: a line (or a live-view update) every `every`
    steps, and the report at the end. Shared by `Watch` and the training frameworks'
    callbacks (`advisor.integrations`)."""

    def __init__(
        self,
        *,
        every: int = 50,
        out: Callable[[str], None] | str | None = AUTO,
        label: str = "your loader",
        min_steps: int = 20,
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

    def report(self, loop: WatchedLoop) -> WatchReport:
        return judge(
            loop.run(), loop.facts, self.cores, min_steps=self.min_steps,
            others_cores=loop.others_cores(),
        )  # fmt: skip

    def step(self, loop: WatchedLoop) -> None:
        done = loop.steps_done
        if (self.out is None and self.view is None) or done % self.every or not done:
            return
        waited = sum(loop.waits[-self.every :])
        stepped = sum(loop.steps[-self.every :])
        samples = sum(loop.samples[-self.every :])
        looped = waited + stepped
        if looped <= 0:
            return
        if self.view is not None:
            self.view.step(done, waited / looped, samples / looped)
        if self.out is not None:
            self.out(
                f"advisor.watch: step {done}: waiting {share(waited / looped)} of each step, "
                f"{rate(samples / looped)} over the last {self.every}"
            )

    def finish(self, loop: WatchedLoop) -> None:
        if self.out is None and self.view is None:
            return
        report = self.report(loop)
        if self.view is not None:
            self.view.done(report)
        if self.out is not None:
            for line in report.lines():
                self.out(f"advisor.watch: {line}")


class Watch:
    """An iterable over the loader's batches that times each step (see `watch`)."""

    def __init__(
        self,
        loader: Iterable[Any],
        *,
        every: int = 50,
        out: Callable[[str], None] | str | None = AUTO,
        label: str = "your loader",
        min_steps: int = 20,
        samples_of: Callable[[Any], int] = batch_samples,
    ) -> None:
        if not isinstance(loader, Iterable):
            raise TypeError(f"watch() takes the loader you iterate, got {type(loader).__name__}")
        self.doctor = Doctor(every=every, out=out, label=label, min_steps=min_steps)
        self.loop = WatchedLoop(
            loader, label=label, samples_of=samples_of, on_step=self.doctor.step
        )

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self.loop
        finally:
            self.doctor.finish(self.loop)

    def report(self) -> WatchReport:
        """The loop so far, judged."""
        return self.doctor.report(self.loop)


def watch(
    loader: Iterable[Any],
    *,
    every: int = 50,
    out: Callable[[str], None] | str | None = AUTO,
    label: str = "your loader",
    min_steps: int = 20,
) -> Watch:
    """Wrap the loader you train with: `for batch in advisor.watch(loader): ...`.

    `every`: steps between summary lines (and live-view updates); `out`: where lines go (None:
    silent, read `.report()` instead; the default: printed, or in a notebook a live view of the
    waiting share with the verdict and the report); `min_steps`: steps before a verdict."""
    return Watch(loader, every=every, out=out, label=label, min_steps=min_steps)

"""The busy CPU per sample the sweep measured, as parts that add up.

The cores' ceiling is the usable cores over the busy CPU per sample of every process on them
(`TrialResult.machine_s`: the loader's, its readers' threads, the network stack, a storage
server on the same machine; a spinning step's spin left out). That figure alone leaves a reader
asking what it holds beyond the decode the trial timed: 6.9 ms of busy CPU per sample against a
1.4 ms decode. Each part is measured on its own (the decode and the reading around it by the
decode probe; the workers' collate and hand-over by the hand-over probe, else the sweep's
estimate; the training thread's taking of batches, or with 0 workers its own collating, by the
sweep), taken in that order up to what the total leaves, and the rest is named as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.core.units import duration

if TYPE_CHECKING:
    from advisor.measure.trial.results import TrialResult

REST = "the rest (other threads and processes: readers, network, a local storage server)"


@dataclass(frozen=True)
class CpuPart:
    """One part of the busy CPU per sample: what spends it, and its CPU seconds per sample."""

    name: str
    s_per_sample: float


def busy_parts(trial: TrialResult, num_workers: int) -> tuple[CpuPart, ...]:
    """The busy CPU per sample with `num_workers` as parts that sum to it, the rest last;
    empty where the busy CPU was not measured."""
    total = trial.machine_s(num_workers)
    if total is None:
        return ()
    decode = trial.decode
    measured: list[tuple[str, float | None]] = []
    if decode is not None:
        measured += [("decode", decode.cpu_s_per_sample), ("read", decode.overhead_s)]
    main = trial.main_thread_s(num_workers)
    if num_workers > 0:
        handover = (
            trial.handover.worker_s_per_sample
            if trial.handover is not None
            else trial.worker_handover_s(num_workers)
        )
        measured += [
            ("collate and hand-over in the workers", handover),
            ("taking batches in the training thread", main),
        ]
    elif decode is not None and decode.loop_cpu_s_per_sample is not None and main is not None:
        measured.append(("collate in the training thread", main - decode.loop_cpu_s_per_sample))
    parts, left = [], total
    for name, seconds in measured:
        if seconds is None or seconds <= 0 or left <= 0:
            continue
        taken = min(seconds, left)
        parts.append(CpuPart(name, taken))
        left -= taken
    return (*parts, CpuPart(REST, max(left, 0.0)))


def parts_words(parts: tuple[CpuPart, ...]) -> str:
    """ "decode 1.4 ms + read 0.5 ms + ... + the rest (...) 2.1 ms"."""
    return " + ".join(f"{p.name} {duration(p.s_per_sample)}" for p in parts)

"""Batches in flight and pinning: prefetch_factor (PF-1, PF-2), /dev/shm (SHM-1), pin_memory
(PIN-1..4).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.core.units import GB, counted, data_rate, data_size, duration, rate
from advisor.decide.facts.context import Context
from advisor.decide.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.thresholds import PINNED_GAIN, SHM_FRACTION
from advisor.decide.words import workers
from native_loader.loader import prefetch_for
from native_loader.shm_plan import prefetch_within_shm, shm_size_gib

SHM_WAYS = "docker run --shm-size={}g; Kubernetes: an emptyDir with medium Memory"
PREFETCH_MIN_SHM = 2  # the batches per worker a /dev/shm for workers is sized for: torch's default


class NoPrefetchWithoutWorkers(Rule):
    """No prefetch without workers.

    Condition: num_workers = 0
    Recommendation: `prefetch_factor = None` (torch rejects it without workers)
    Source: torch DataLoader contract
    """

    id = "PF-1"
    decision = DecisionKind.PREFETCH_FACTOR
    key = Key.PREFETCH_FACTOR

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if state.get(Key.NUM_WORKERS, 0) != 0:
            return None
        return self.finding(
            None, "No workers: batches are loaded in the main process, nothing to prefetch."
        )


class PrefetchHidesLatency(Rule):
    """Prefetch covers first-byte latency, within /dev/shm.

    Condition: num_workers > 0
    Recommendation: the prefetch the trial's sweep measured the chosen count with, when training
    reads what the trial read; else `ceil(first-byte p95 x samples/s per worker / batch size) + 1`,
    clamped to 2..8 (`native_loader.loader.prefetch_for`, the formula the trial used); lowered
    to what half of /dev/shm's free bytes hold, at least 1 (SHM-1 says what to change)
    Source: measured first-byte p95 (default 2 x model latency) x expected rate; measured: free
    /dev/shm (statvfs)
    """

    id = "PF-2"
    decision = DecisionKind.PREFETCH_FACTOR
    key = Key.PREFETCH_FACTOR

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        w = state.get(Key.NUM_WORKERS, 0)
        if w <= 0:
            return None
        found = self.latency(ctx, state, w)
        fits = shm_prefetch(ctx, w, found.value)
        if fits is None or fits >= found.value:
            return found
        held = f"only {fits} per worker" if fits else "not even 1 per worker: 1, the least"
        return dataclasses.replace(
            found,
            value=max(fits, 1),
            rationale=f"{found.rationale} /dev/shm holds {held} (SHM-1).",
            evidence={**found.evidence, "latency_prefetch_factor": found.value},
        )

    def latency(self, ctx: Context, state: State, w: int) -> Finding:
        """The prefetch that hides the storage's latency (or the trial measured), before
        /dev/shm lowers it."""
        measured = ctx.measured_prefetch(state, w)
        if measured is not None:
            return self.finding(
                measured,
                f"{counted(measured, 'batch', 'batches')} loaded ahead per worker: the prefetch "
                f"the trial measured {workers(w)} with, so its measured rate holds.",
                evidence={"measured_prefetch_factor": measured, "num_workers": w},
                measured=True,
                confidence="high",
            )
        storage = ctx.read_storage(state)
        probe = ctx.read_probe(state)
        latency = probe.first_byte_p95_s if probe else 2 * storage.first_byte_s
        per_worker = ctx.expected_rate(state) / w
        batches = latency * per_worker / ctx.workload.batch_size
        value = prefetch_for(latency, per_worker, ctx.workload.batch_size)
        return self.finding(
            value,
            f"A worker produces {rate(per_worker)}; a stall of {duration(latency)} spans "
            f"{batches:,.1f} of its batches of {ctx.workload.batch_size}, so keep "
            f"{counted(value, 'batch', 'batches')} loaded ahead per worker.",
            evidence={
                "first_byte_p95_s": latency,
                "samples_per_s_per_worker": round(per_worker, 1),
                "batch_size": ctx.workload.batch_size,
            },
            measured=probe is not None,
            confidence="high" if probe is not None else "low",
        )


def shm_room(ctx: Context) -> tuple[int, int] | None:
    """(bytes of /dev/shm free, bytes other processes hold there) where training runs: this
    machine's as probed, or a target's size (a fresh machine's is empty); None: not known."""
    hw = ctx.hardware
    if hw.target is None and hw.shm_free_bytes is not None:
        return hw.shm_free_bytes, max((hw.shm_bytes or 0) - hw.shm_free_bytes, 0)
    return None if hw.shm_bytes is None else (hw.shm_bytes, 0)


def shm_prefetch(ctx: Context, w: int, prefetch: int) -> int | None:
    """The prefetch up to `prefetch` whose batches in flight (ranks per node x `w` workers)
    fit in half of /dev/shm's free bytes (0: not even one); None: /dev/shm not known."""
    room = shm_room(ctx)
    if room is None:
        return None
    share = SHM_FRACTION * room[0]
    return prefetch_within_shm(prefetch, w, ctx.batch_bytes, share, ctx.ranks_per_node)


class SharedMemoryTooSmall(Rule):
    """/dev/shm too small for batches in flight.

    Condition: ranks per node x workers x PF-2's prefetch x batch bytes > half of /dev/shm's free
    bytes (a target's: its size); with no workers, a count the trial could not measure for it
    Recommendation: prefetch lowered to what fits (PF-2) and the `--shm-size` that keeps it
    (Kubernetes: an emptyDir with medium Memory); where one batch per worker does not fit,
    that size, or fewer workers or smaller batches
    Source: measured: /dev/shm's free bytes (statvfs), batch bytes (decoded, where measured)
    """

    id = "SHM-1"
    decision = DecisionKind.PREFETCH_FACTOR
    key = None  # advisory: adds a note, sets no value
    shown_in_notes = True  # workers refused at their first batch: a warning, not a detail

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        room = shm_room(ctx)
        if room is None:
            return None
        free, used = room
        w = state.get(Key.NUM_WORKERS, 0)
        if w <= 0:
            return self._no_workers(ctx, free, used)
        wanted = PrefetchHidesLatency().latency(ctx, state, w).value
        ranks, batch = ctx.ranks_per_node, ctx.batch_bytes
        need = ranks * w * wanted * batch
        if need <= SHM_FRACTION * free:
            return None
        fits = prefetch_within_shm(wanted, w, batch, SHM_FRACTION * free, ranks)
        size = shm_size_gib(need, used)
        held = (
            f"{counted(ranks, 'rank') + ' x ' if ranks > 1 else ''}{counted(w, 'worker')} x "
            f"{counted(wanted, 'batch', 'batches')} of {data_size(batch)} keep {data_size(need)} "
            f"loaded ahead, but /dev/shm has {data_size(free)} free"
        )
        if fits >= 1:
            why = (
                f"{held}: prefetch_factor lowered to {fits} to fit in half of it. Give the "
                f"container {size} GiB of shared memory ({SHM_WAYS.format(size)}) to keep "
                f"{wanted}."
            )
        else:
            why = (
                f"{held}: not even 1 batch per worker fits in half of it, and the exported "
                f"loader stops at its first batch. Give the container at least {size} GiB of "
                f"shared memory ({SHM_WAYS.format(size)}), or lower num_workers or batch_size."
            )
        return self.finding(
            f"--shm-size={size}g",
            why,
            evidence={
                "shm_free_bytes": free,
                "in_flight_bytes": round(need),
                "batch_bytes": batch,
                "fits_prefetch_factor": fits,
            },
            measured=True,
            confidence="high",
        )

    def _no_workers(self, ctx: Context, free: int, used: int) -> Finding | None:
        """No workers, nothing in flight: a note only where the trial could not measure a
        count because /dev/shm could not hold its batches (why no worker count was chosen)."""
        refused = ctx.trial.shm_refused if ctx.trial is not None else ()
        if not refused:
            return None
        w, batch = min(refused), ctx.batch_bytes
        need = ctx.ranks_per_node * w * PREFETCH_MIN_SHM * batch
        size = shm_size_gib(need, used)
        return self.finding(
            f"--shm-size={size}g",
            f"/dev/shm has {data_size(free)} free: the trial could not measure num_workers "
            f"{', '.join(map(str, refused))}, whose batches of {data_size(batch)} it cannot hold. "
            f"To load with workers, give the container {size} GiB of shared memory "
            f"({SHM_WAYS.format(size)}), or lower batch_size.",
            evidence={"shm_free_bytes": free, "batch_bytes": batch, "refused": list(refused)},
            measured=True,
            confidence="high",
        )


class NoGpuNoPin(Rule):
    """No GPU, no pinned memory.

    Condition: no GPU probed and no target GPU
    Recommendation: `pin_memory = False`
    Source: [IO] 2: pinned memory speeds host-to-device copies only
    """

    id = "PIN-1"
    decision = DecisionKind.PIN_MEMORY
    key = Key.PIN_MEMORY

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if ctx.has_gpu:
            return None
        return self.finding(
            False,
            "No GPU on this machine and no target GPU given: pinned memory would only lock RAM "
            "(and torch warns). Plan for a GPU with a target GPU to get True.",
            evidence={"gpus": 0},
            confidence="high",
        )


class PinnedNotFaster(Rule):
    """Pinned copies measured no faster.

    Condition: trial measured pinned H2D < 1.1 x pageable
    Recommendation: `pin_memory = False`
    Source: measured: host-to-device GB/s pinned vs pageable
    """

    id = "PIN-2"
    decision = DecisionKind.PIN_MEMORY
    key = Key.PIN_MEMORY

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        h2d = ctx.trial.host_to_device if ctx.trial is not None else None
        if h2d is None or h2d.pinned_gb_s >= PINNED_GAIN * h2d.pageable_gb_s:
            return None
        return self.finding(
            False,
            f"Measured: pinned copies at {data_rate(h2d.pinned_gb_s * GB)}, pageable at "
            f"{data_rate(h2d.pageable_gb_s * GB)}; pinning gains less than 10% here and locks "
            "memory.",
            evidence={"pinned_gb_s": h2d.pinned_gb_s, "pageable_gb_s": h2d.pageable_gb_s},
            measured=True,
            confidence="high",
        )


class LowRamNoPin(Rule):
    """RAM too tight for pinned memory.

    Condition: RAM per rank left after workers and 2 x in-flight batches < 10%
    Recommendation: `pin_memory = False`
    Source: [IO] 2: pinned memory more likely to run out of memory
    """

    id = "PIN-3"
    decision = DecisionKind.PIN_MEMORY
    key = Key.PIN_MEMORY

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        ram = ctx.ram_per_rank
        if ram is None:
            return None
        w = state.get(Key.NUM_WORKERS, 0)
        in_flight = max(w, 1) * (state.get(Key.PREFETCH_FACTOR) or 2) * ctx.batch_bytes
        left = ram - w * ctx.worker_rss_bytes - 2 * in_flight
        if left >= 0.1 * ram:
            return None
        return self.finding(
            False,
            f"Only {data_size(max(left, 0))} of {data_size(ram)} per rank is left after "
            f"{counted(w, 'worker')} and the batches in flight; pinned (page-locked) buffers could "
            "run the machine out of memory.",
            evidence={"ram_per_rank_bytes": ram, "left_bytes": round(left)},
        )


class PinForGpu(Rule):
    """Pin memory for the GPU.

    Condition: a GPU (probed or planned)
    Recommendation: `pin_memory = True`
    Source: [IO] 2: no staging copy; measured speed-up when available
    """

    id = "PIN-4"
    decision = DecisionKind.PIN_MEMORY
    key = Key.PIN_MEMORY

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        if not ctx.has_gpu:
            return None
        h2d = ctx.trial.host_to_device if ctx.trial is not None else None
        gpu = ctx.hardware.gpus[0]
        evidence: dict[str, Any] = {"gpu": gpu.name, "planned": ctx.hardware.planned}
        if h2d is not None:
            evidence.update(pinned_gb_s=h2d.pinned_gb_s, pageable_gb_s=h2d.pageable_gb_s)
            why = f"measured {h2d.pinned_gb_s / max(h2d.pageable_gb_s, 1e-9):.1f}x faster copies"
        else:
            why = "pinned buffers skip the staging copy on every host-to-device transfer"
        return self.finding(
            True,
            f"GPU {gpu.name}: {why}.",
            evidence=evidence,
            measured=h2d is not None,
            confidence="high" if h2d is not None else "medium",
        )

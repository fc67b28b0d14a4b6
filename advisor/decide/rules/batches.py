"""Batches in flight and pinning: prefetch_factor (PF-1, PF-2), /dev/shm (SHM-1), pin_memory
(PIN-1..4).
"""

from __future__ import annotations

import math
from typing import Any

from advisor.core.units import GB, GIB, counted, data_rate, data_size, duration, rate
from advisor.decide.rules.base import Rule
from advisor.decide.rules.context import Context
from advisor.decide.rules.keys import DecisionKind, Finding, Key, State
from advisor.decide.rules.thresholds import PINNED_GAIN, SHM_FRACTION
from advisor.decide.rules.words import workers
from native_loader.loader import prefetch_for


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
    """Prefetch covers first-byte latency.

    Condition: num_workers > 0
    Recommendation: the prefetch the trial's sweep measured the chosen count with, when training
    reads what the trial read; else `ceil(first-byte p95 x samples/s per worker / batch size) + 1`,
    clamped to 2..8 (`native_loader.loader.prefetch_for`, the formula the trial used)
    Source: measured first-byte p95 (default 2 x model latency) x expected rate
    """

    id = "PF-2"
    decision = DecisionKind.PREFETCH_FACTOR
    key = Key.PREFETCH_FACTOR

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        w = state.get(Key.NUM_WORKERS, 0)
        if w <= 0:
            return None
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


class SharedMemoryTooSmall(Rule):
    """/dev/shm too small for batches in flight.

    Condition: ranks per node x workers x prefetch x batch bytes > half of /dev/shm
    Recommendation: enlarge /dev/shm (`--shm-size`) or lower prefetch/batch
    Source: measured: /dev/shm size (statvfs)
    """

    id = "SHM-1"
    decision = DecisionKind.PREFETCH_FACTOR
    key = None  # advisory: adds a note, sets no value
    shown_in_notes = True  # workers dying with a bus error: a warning, not a detail

    def evaluate(self, ctx: Context, state: State) -> Finding | None:
        w, pf, shm = (
            state.get(Key.NUM_WORKERS, 0),
            state.get(Key.PREFETCH_FACTOR),
            ctx.hardware.shm_bytes,
        )
        if w <= 0 or pf is None or shm is None:
            return None
        need = ctx.ranks_per_node * w * pf * ctx.batch_bytes
        if need <= SHM_FRACTION * shm:
            return None
        size_gib = math.ceil(2 * need / GIB)  # docker's --shm-size "g" is GiB
        return self.finding(
            f"--shm-size={size_gib}g",
            f"{counted(ctx.ranks_per_node, 'rank')} x {counted(w, 'worker')} x "
            f"{counted(pf, 'batch', 'batches')} of {data_size(ctx.batch_bytes)} keep "
            f"{data_size(need)} loaded ahead, but /dev/shm is {data_size(shm)}: workers can die "
            f"with a bus error. Give the container at least {size_gib} GiB of shared memory.",
            evidence={
                "shm_bytes": shm,
                "in_flight_bytes": round(need),
                "batch_bytes": ctx.batch_bytes,
            },
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

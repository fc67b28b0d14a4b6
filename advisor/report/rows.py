"""Labelled rows for a data set's profile, the machine, and a trial (`advisor.report`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.core.units import binary_size, duration, mb_per_s, per_s, rate
from native_loader import parse_uri

if TYPE_CHECKING:
    from advisor.measure.hardware import GpuInfo, HardwareProfile
    from advisor.measure.profile import DatasetProfile
    from advisor.measure.trial.results import TrialResult

Row = tuple[str, str]


def text_table(rows: Sequence[Row]) -> str:
    """The rows as aligned text: the label, two spaces, the value."""
    if not rows:
        return ""
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def text_columns(rows: Sequence[Sequence[str]]) -> str:
    """A header row and body rows as left-aligned text columns, two spaces apart: the text
    twin of the wizard's HTML tables."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def profile_rows(profile: DatasetProfile) -> list[Row]:
    """The data set as listed: its objects, sizes, formats and samples, and its notes."""
    sizes = profile.sizes
    approx = profile.estimate_word  # "", "about " or "at least ": the count's basis
    formats = ", ".join(
        f"{f.name} ({f.objects:,} objects, {binary_size(f.bytes)}"
        + (f", ~{f.samples_per_object:,.0f} samples each" if f.samples_per_object else "")
        + ")"
        for f in profile.formats
    )
    rows = [
        ("data set", profile.uri),
        ("objects", profile.objects_said),
        ("total size", f"{approx}{binary_size(profile.total_bytes)}"),
        (
            "object size",
            f"median {binary_size(sizes.p50)}, p90 {binary_size(sizes.p90)}, "
            f"p99 {binary_size(sizes.p99)}, max {binary_size(sizes.max)}",
        ),
        ("formats", formats or "unknown"),
        ("samples (estimate)", f"{approx}{profile.samples_estimate:,}"),
        ("top-level folders", f"{profile.distinct_prefixes:,}"),
        ("listing took", duration(profile.list_seconds)),
    ]
    rows += [("note", note) for note in profile.notes]
    return rows


def gpu_rows(hardware: HardwareProfile) -> list[Row]:
    """One row per GPU, probed or planned, or one saying none was found."""
    if not hardware.gpus:
        return [("GPUs", "none found")]
    rows = []
    for gpu in hardware.gpus:
        label = f"{'planned GPU' if hardware.planned else 'GPU'} {gpu.index}"
        rows.append((label, ", ".join([gpu.name, *gpu_facts(gpu)])))
    return rows


def gpu_facts(gpu: GpuInfo) -> list[str]:
    """What is known of one GPU beside its name: memory, PCIe link, NVLink, driver; the CLI's
    row and the wizard's card show the same."""
    parts = []
    if gpu.memory_total_bytes is not None:
        parts.append(binary_size(gpu.memory_total_bytes))
    if gpu.pcie_gen_max is not None and gpu.pcie_width_max is not None:
        parts.append(f"PCIe gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}")
    if gpu.nvlink_active_links:
        parts.append(f"NVLink x{gpu.nvlink_active_links}")
    if gpu.driver_version:
        parts.append(f"driver {gpu.driver_version}")
    return parts


def hardware_rows(hardware: HardwareProfile) -> list[Row]:
    """The machine beside its GPUs: cores, RAM, /dev/shm, the local disk, and the notes."""
    cores = f"{hardware.usable_cores:g} usable of {hardware.cpu_count} logical CPUs"
    if hardware.cgroup_cpu_limit is not None:
        cores += f" (cgroup limit {hardware.cgroup_cpu_limit:g})"
    rows: list[Row] = [("CPU cores", cores)]
    if hardware.ram_total_bytes is not None:
        free = hardware.ram_available_bytes
        ram = binary_size(hardware.ram_total_bytes)
        rows.append(("RAM", ram + (f" ({binary_size(free)} available)" if free else "")))
    if hardware.shm_bytes is not None:
        shm_free = hardware.shm_free_bytes if hardware.target is None else None  # this machine's
        shm = f" ({binary_size(shm_free)} free)" if shm_free is not None else ""
        rows.append(("/dev/shm", binary_size(hardware.shm_bytes) + shm))
    if hardware.disk is not None:
        disk = hardware.disk
        fs = f", {disk.filesystem}" if disk.filesystem else ""
        rows.append(
            ("local disk", f"{disk.path}: {disk.kind}, {binary_size(disk.free_bytes)} free{fs}")
        )
    rows += [("note", note) for note in hardware.notes]
    return rows


def trial_rows(trial: TrialResult) -> list[Row]:
    """The trial: its time, the best count as training saw it, the storage (requested from
    S3, or a folder's files read) and the decode, and its notes."""
    rows = [("time used", f"{duration(trial.seconds_used)} of {duration(trial.seconds_budget)}")]
    best = trial.best_count()
    if best is not None:
        bound = "at least " if best.lower_bound else ""
        rows.append(
            (
                "best measured",
                f"num_workers={best.num_workers}: {bound}{rate(best.median)} "
                f"(median; slices {per_s(best.low)}-{per_s(best.high)}) as training sees it",
            )
        )
    storage = trial.storage
    if storage is not None:
        first = "first byte" if parse_uri(trial.uri)[0] == "s3" else "first byte of a file"
        rows.append(
            (
                "storage",
                f"{first} in {duration(storage.first_byte_p50_s)} (median, p95 "
                f"{duration(storage.first_byte_p95_s)}), up to {mb_per_s(storage.best_mb_s)}",
            )
        )
    if trial.decode is not None:
        rows.append(
            (
                "decode",
                f"{duration(trial.decode.cpu_s_per_sample)} of CPU per sample "
                f"({trial.decode.transform})",
            )
        )
    if trial.cancelled:
        rows.append(("note", "cancelled: partial results"))
    rows += [("note", note) for note in trial.notes]
    return rows

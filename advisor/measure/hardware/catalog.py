"""GPUs for planning: a catalogue of common training GPUs and the PCIe bandwidth per lane."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core.units import GB, GIB

# PCIe payload bandwidth per lane and direction, GB/s (after line encoding), by generation.
PCIE_LANE_GB_S: dict[int, float] = {
    1: 0.25,
    2: 0.5,
    3: 0.985,
    4: 1.969,
    5: 3.938,
    6: 7.563,
}


@dataclass(frozen=True)
class GpuSpec:
    """A catalogued GPU for planning: memory in bytes, PCIe generation and width, NVLink links."""

    name: str
    memory_total_bytes: int
    pcie_gen: int
    pcie_width: int
    nvlink_links: int = 0


# Common training GPUs, from the vendors' data sheets (memory as marketed; PCIe host link).
GPU_CATALOG: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        GpuSpec("T4", 16 * GIB, 3, 16),
        GpuSpec("L4", 24 * GIB, 4, 16),
        GpuSpec("A10G", 24 * GIB, 4, 16),
        GpuSpec("V100-16GB", 16 * GIB, 3, 16, nvlink_links=6),
        GpuSpec("V100-32GB", 32 * GIB, 3, 16, nvlink_links=6),
        GpuSpec("A100-40GB", 40 * GIB, 4, 16, nvlink_links=12),
        GpuSpec("A100-80GB", 80 * GIB, 4, 16, nvlink_links=12),
        GpuSpec("H100-SXM", 80 * GIB, 5, 16, nvlink_links=18),
        GpuSpec("H100-PCIe", 80 * GIB, 5, 16),
        GpuSpec("H200", 141 * GB, 5, 16, nvlink_links=18),
        GpuSpec("B200", 180 * GB, 5, 16, nvlink_links=18),
        GpuSpec("RTX-4090", 24 * GIB, 4, 16),
    )
}


def _catalog_key(name: str) -> str:
    return "".join(c for c in name.upper() if c.isalnum())


def lookup_gpu(name: str) -> GpuSpec:
    """The catalog entry for `name`, ignoring case, spaces, dashes and a leading "NVIDIA"."""
    key = _catalog_key(name).removeprefix("NVIDIA")
    for spec in GPU_CATALOG.values():
        if _catalog_key(spec.name) == key:
            return spec
    aliases = {"V100": "V100-16GB", "A100": "A100-40GB", "H100": "H100-SXM", "4090": "RTX-4090"}
    for alias, target in aliases.items():
        if key == _catalog_key(alias):
            return GPU_CATALOG[target]
    known = ", ".join(GPU_CATALOG)
    raise ValueError(f"unknown GPU {name!r}; the catalog knows: {known}")

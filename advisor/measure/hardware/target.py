"""The machine training will run on, named once: a node's cores, GPUs, memory, local disk and
network, given by hand (`--target-cores`, ...) or from a catalogue of common training instances
(`--target-instance p4d.24xlarge`). The trial measures per-sample costs here; the model carries
them to this machine (`HardwareProfile.planned_for`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from advisor.core.bounds import Range, arg_type, bounded, check_ranges, range_of
from advisor.core.units import GB, GIB

# A Linux host's /dev/shm is a tmpfs of half its RAM unless set otherwise (a container's is what
# its runtime gives it: Docker's default is 64 MB, `--shm-size` sets it).
SHM_SHARE_OF_RAM = 0.5
# The figures as people type them (the CLI's and the wizard's units): memory in GiB, as
# `free -g` and Kubernetes' Gi show it; local disk in GB, as the vendors publish it.
RAM_GIB = Range(0, 1 << 20, float, low_open=True, unit="GiB")
DISK_GB = Range(0, 1 << 25, float, unit="GB")


@dataclass(frozen=True)
class TargetMachine:
    """One training node, as the plan assumes it.

    cores: vCPUs (logical CPUs) the job may use on the node, fractional for a CPU quota
        (Kubernetes' `cpu: 1500m` is 1.5).
    gpus: GPUs on the node (each one rank); None: the workload's `gpus_per_node`.
    gpu: the GPU's catalogue name (`advisor.measure.hardware.catalog`); None: none planned.
    ram_bytes: the node's memory; None: unknown (no cap from memory).
    shm_bytes: /dev/shm's size; None: half the RAM, Linux's default for a host.
    local_disk_bytes: local (instance-store NVMe) disk a copy can go to; 0: none (EBS only);
        None: unknown.
    local_disks: the NVMe devices that disk is made of, striped into one volume (RAID 0): each
        adds one device's bandwidth to the node's local reads.
    network_gbps: the node's network bandwidth in Gbit/s, as the vendor publishes it; None:
        unknown (the storage's own ceiling alone).
    core_speed: one target core's speed over one of this machine's (CPU seconds measured here
        are divided by it there); 1.0 unless the user knows better.
    name: the catalogue's name ("p4d.24xlarge"); None for a machine given by its figures.
    """

    cores: float = bounded(1.0, 0, 4096, low_open=True, unit="cores")
    gpus: int | None = bounded(None, 0, 64, unit="GPUs")
    gpu: str | None = None
    ram_bytes: int | None = bounded(None, 0, 1 << 50, low_open=True, unit="bytes")
    shm_bytes: int | None = bounded(None, 0, 1 << 50, low_open=True, unit="bytes")
    local_disk_bytes: int | None = bounded(None, 0, 1 << 55, unit="bytes")
    local_disks: int = bounded(1, 1, 64, unit="disks")
    network_gbps: float | None = bounded(None, 0, 100_000, low_open=True, unit="Gbit/s")
    core_speed: float = bounded(1.0, 0.05, 20, unit="x")
    name: str | None = None

    def __post_init__(self) -> None:
        check_ranges(self)

    @property
    def shm_or_default(self) -> int | None:
        """/dev/shm as given, else half the RAM (None: neither known)."""
        if self.shm_bytes is not None:
            return self.shm_bytes
        return None if self.ram_bytes is None else int(self.ram_bytes * SHM_SHARE_OF_RAM)

    def assumptions(self) -> tuple[str, ...]:
        """What a plan for this machine assumes beyond the figures given, in plain words: a
        figure not given is this machine's."""
        said = []
        if self.core_speed == 1.0:
            said.append("a core as fast as one of this machine's (--target-core-speed)")
        if self.ram_bytes is None:
            said.append("this machine's memory (--target-ram)")
        if self.shm_bytes is None:
            said.append(
                "/dev/shm of half the RAM, a Linux host's default; a container's may be less "
                "(--target-shm)"
                if self.ram_bytes is not None
                else "this machine's /dev/shm (--target-shm)"
            )
        if self.local_disk_bytes is None:
            said.append("this machine's local disk (--target-disk)")
        elif self.local_disk_bytes and self.local_disks > 1:
            said.append(f"its {self.local_disks} NVMe disks striped into one volume (RAID 0)")
        if self.network_gbps is None:
            said.append("the network as the trial found it here (--target-network-gbps)")
        return tuple(said)

    def describe(self) -> str:
        """ "p4d.24xlarge: 96 cores, 8 x A100-40GB, ..." in a line."""
        from advisor.core.units import data_size

        parts = [f"{self.cores:g} cores"]
        if self.gpus:
            parts.append(f"{self.gpus} x {self.gpu or 'GPU'}")
        if self.ram_bytes is not None:
            parts.append(f"{data_size(self.ram_bytes)} RAM")
        if self.local_disk_bytes is not None:
            disk = data_size(self.local_disk_bytes) if self.local_disk_bytes else "no"
            disks = f" ({self.local_disks} disks)" if self.local_disks > 1 else ""
            parts.append(f"{disk} local NVMe{disks}")
        if self.network_gbps is not None:
            parts.append(f"{self.network_gbps:g} Gbit/s network")
        if self.core_speed != 1.0:
            parts.append(f"cores {self.core_speed:g}x this machine's")
        head = self.name or "the target machine"
        return f"{head}: {', '.join(parts)}"


def _aws(name: str, cores: int, gpus: int, gpu: str, ram_gib: int, nvme: tuple[int, float],
         gbps: float) -> TargetMachine:  # fmt: skip
    disks, disk_gb = nvme
    return TargetMachine(
        cores=cores, gpus=gpus, gpu=gpu, ram_bytes=ram_gib * GIB,
        local_disk_bytes=int(disks * disk_gb * GB), local_disks=max(disks, 1),
        network_gbps=gbps, name=name,
    )  # fmt: skip


# Common training instances, from AWS's published EC2 specifications (accelerated computing:
# vCPUs, GPUs, memory, instance-store NVMe as devices x GB, network bandwidth; "up to" figures
# taken at their peak). SageMaker's `ml.` names are the same machines.
INSTANCES: dict[str, TargetMachine] = {
    m.name or "": m
    for m in (
        _aws("g5.xlarge", 4, 1, "A10G", 16, (1, 250), 10),
        _aws("g5.2xlarge", 8, 1, "A10G", 32, (1, 450), 10),
        _aws("g5.12xlarge", 48, 4, "A10G", 192, (1, 3800), 40),
        _aws("g5.48xlarge", 192, 8, "A10G", 768, (2, 3800), 100),
        _aws("g6.xlarge", 4, 1, "L4", 16, (1, 250), 10),
        _aws("g6.12xlarge", 48, 4, "L4", 192, (4, 940), 40),
        _aws("g6.48xlarge", 192, 8, "L4", 768, (8, 940), 100),
        _aws("p3.2xlarge", 8, 1, "V100-16GB", 61, (0, 0), 10),
        _aws("p3.16xlarge", 64, 8, "V100-16GB", 488, (0, 0), 25),
        _aws("p4d.24xlarge", 96, 8, "A100-40GB", 1152, (8, 1000), 400),
        _aws("p4de.24xlarge", 96, 8, "A100-80GB", 1152, (8, 1000), 400),
        _aws("p5.48xlarge", 192, 8, "H100-SXM", 2048, (8, 3840), 3200),
        _aws("p5e.48xlarge", 192, 8, "H200", 2048, (8, 3840), 3200),
    )
}


def lookup_instance(name: str) -> TargetMachine:
    """The catalogue's machine for `name` ("p4d.24xlarge", SageMaker's "ml.p4d.24xlarge"),
    ignoring case; a ValueError that lists the catalogue for any other."""
    key = name.strip().lower().removeprefix("ml.")
    if key in INSTANCES:
        return INSTANCES[key]
    known = ", ".join(INSTANCES)
    raise ValueError(
        f"unknown instance {name!r}; the catalogue knows: {known} (and their SageMaker ml. "
        "names); for another machine give --target-cores (and --target-ram, --target-disk, "
        "--target-network-gbps)"
    )


def target_machine(
    instance: str | None = None,
    *,
    cores: float | None = None,
    gpus: int | None = None,
    gpu: str | None = None,
    ram_bytes: int | None = None,
    shm_bytes: int | None = None,
    local_disk_bytes: int | None = None,
    network_gbps: float | None = None,
    core_speed: float | None = None,
) -> TargetMachine | None:
    """The target from a catalogue name and/or figures (a figure overrides the catalogue's);
    None when nothing is given (the plan is for this machine). A catalogue-free target needs
    its cores."""
    figures = dict(
        cores=cores, gpus=gpus, gpu=gpu, ram_bytes=ram_bytes, shm_bytes=shm_bytes,
        local_disk_bytes=local_disk_bytes, network_gbps=network_gbps, core_speed=core_speed,
    )  # fmt: skip
    given = {k: v for k, v in figures.items() if v is not None}
    if instance is None and not given:
        return None
    if instance is not None:
        return replace(lookup_instance(instance), **given)  # type: ignore[arg-type]
    if cores is None:
        raise ValueError(
            "a target machine needs its cores: give --target-cores N (or --target-instance NAME)"
        )
    return TargetMachine(**given)  # type: ignore[arg-type]


def target_arguments() -> argparse.ArgumentParser:
    """The CLI's flags for the machine training runs on, where it is not this one: a catalogue
    instance and/or its figures (a figure overrides the instance's), each checked against its
    field's range."""
    target = argparse.ArgumentParser(add_help=False)
    group = target.add_argument_group(
        "the training machine (default: this one; the trial measures here, the model plans there)"
    )
    names = ", ".join(INSTANCES)
    group.add_argument(
        "--target-instance", help=f"a catalogued node: {names} (or SageMaker's ml. names)"
    )
    for name, flag, what in (
        ("cores", "--target-cores", "vCPUs of one node the job may use, a fraction for a quota"),
        ("network_gbps", "--target-network-gbps", "the node's network, Gbit/s"),
        ("core_speed", "--target-core-speed", "a node's core against one of this machine's"),
    ):
        bound = range_of(TargetMachine, name)
        group.add_argument(flag, type=arg_type(bound, flag), help=f"{what}, {bound}")
    for flag, bound, what in (
        ("--target-ram", RAM_GIB, "the node's memory"),
        ("--target-shm", RAM_GIB, "the node's /dev/shm (default: half the RAM)"),
        ("--target-disk", DISK_GB, "the node's local NVMe for a copy (0: none)"),
    ):
        group.add_argument(flag, type=arg_type(bound, flag), help=f"{what}, {bound}")
    group.add_argument("--target-gpu", help="plan for this GPU (e.g. A100-80GB) instead of probing")
    return target


def target_from_args(args: argparse.Namespace) -> TargetMachine | None:
    """The target the flags of `target_arguments` name; None: the plan is for this machine
    (`--target-gpu` alone plans that GPU on it)."""
    gib = {name: getattr(args, name, None) for name in ("target_ram", "target_shm")}
    disk = getattr(args, "target_disk", None)
    figures = (args.target_cores, gib["target_ram"], gib["target_shm"], disk,
               args.target_network_gbps, args.target_core_speed)  # fmt: skip
    if args.target_instance is None and all(f is None for f in figures):
        return None
    return target_machine(
        args.target_instance,
        cores=args.target_cores,
        gpu=args.target_gpu,
        ram_bytes=None if gib["target_ram"] is None else round(gib["target_ram"] * GIB),
        shm_bytes=None if gib["target_shm"] is None else round(gib["target_shm"] * GIB),
        local_disk_bytes=None if disk is None else round(disk * GB),
        network_gbps=args.target_network_gbps,
        core_speed=args.target_core_speed,
    )

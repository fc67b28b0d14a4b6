"""How the rules name things in their rationales: plain words for the model's storage and
ceilings and for a local disk's kind, so a card never reads "local-nvme" or "unknown storage"."""

from __future__ import annotations

from advisor.core.units import counted

_STORAGE = {
    "s3": "S3",
    "local-nvme": "a local NVMe disk",
    "local-ssd": "a local SSD",
    "local-hdd": "a local hard disk",
    "efs": "EFS",
    "shared-fs": "a shared file system",
}
_CEILINGS = {
    "cpu": "CPU time per sample (decoding)",
    "bandwidth": "the storage's bandwidth",
    "latency": "the storage's time to first byte",
    "objects": "the epoch's objects, dealt whole to the loader processes",
}
_DISKS = {"nvme": "the local NVMe disk", "ssd": "the local SSD", "hdd": "the local hard disk"}


def storage_words(name: str) -> str:
    """The model's storage name for people: "local-nvme" -> "a local NVMe disk"."""
    return _STORAGE.get(name, name)


def ceiling_words(bottleneck: str) -> str:
    """The model's bottleneck ("cpu", "bandwidth", "latency") for people."""
    return _CEILINGS.get(bottleneck, bottleneck)


def disk_words(kind: str | None) -> str:
    """A local disk's kind for people; an unknown kind is just "the local disk"."""
    return _DISKS.get(kind or "", "the local disk")


def workers(n: int) -> str:
    """A worker count: "1 worker", "4 workers", "no workers (loading in the training process)"."""
    return "no workers (loading in the training process)" if n == 0 else counted(n, "worker")

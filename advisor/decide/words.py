"""How the rules name things in their rationales: plain words for the model's storage and
ceilings and for a local disk's kind, so a card never reads "local-nvme" or "unknown storage";
and the one wording of a trial measured under another setup than the one advised now."""

from __future__ import annotations

from collections.abc import Sequence

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
    "training": "the training thread, which takes each batch from the workers and then steps",
}
_DISKS = {"nvme": "the local NVMe disk", "ssd": "the local SSD", "hdd": "the local hard disk"}


def storage_words(name: str) -> str:
    """The model's storage name for people: "local-nvme" -> "a local NVMe disk"."""
    return _STORAGE.get(name, name)


def ceiling_words(bottleneck: str) -> str:
    """The model's bottleneck ("cpu", "bandwidth", "latency", "objects", "training") for
    people."""
    return _CEILINGS.get(bottleneck, bottleneck)


def disk_words(kind: str | None) -> str:
    """A local disk's kind for people; an unknown kind is just "the local disk"."""
    return _DISKS.get(kind or "", "the local disk")


def workers(n: int) -> str:
    """A worker count: "1 worker", "4 workers", "no workers (loading in the training process)"."""
    return "no workers (loading in the training process)" if n == 0 else counted(n, "worker")


def another_setup(changes: Sequence[str]) -> str:
    """Why a trial's rates do not hold now: "the trial was measured under another setup
    (batch_size 64 -> 32)"; `changes` as `TrialSetup.differences` names them."""
    return f"the trial was measured under another setup ({'; '.join(changes)})"


def stale_trial_note(changes: Sequence[str], fate: str) -> str:
    """The note where a trial under another setup is set aside; `fate`: what became of its
    rates ("are not used", "were dropped")."""
    why = another_setup(changes)
    return (
        f"{why[0].upper()}{why[1:]}: its measured rates {fate}; run the trial again to measure "
        "this setup."
    )

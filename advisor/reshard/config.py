"""Re-shard settings: one frozen dataclass, validated on creation, and the size parser."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from advisor.core.units import GIB, KIB, MIB

LABEL_MODES = ("auto", "parent", "none")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.I)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_size(text: str) -> int:
    """Bytes in ``"128MB"``, ``"64MiB"``, ``"1.5GB"`` or ``"1000000"`` (MB = 10**6, MiB = 2**20)."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size such as 128MB, 64MiB or 1000000")
    number, unit = float(match.group(1)), (match.group(2) or "").lower()
    base = unit[:1] if unit[:1] in "kmgt" else ""
    factor = 1024 ** "_kmgt".index(base) if unit.startswith(base) and "i" in unit else _UNITS[base]
    return int(number * factor)


@dataclass(frozen=True)
class ReshardConfig:
    """How a re-shard packs and moves data. The first four fields decide the bytes of every shard
    (they are part of the plan saved at the destination); the others only how fast and how much
    memory it takes.

    Attributes:
        shard_size: target bytes (B) of tar data per shard; a shard closes before a sample would
            take it past this (a single larger sample gets a shard of its own). Default 128 MB;
            64 KiB to 4 GiB.
        seed: seed of the sample shuffle before packing. Default 0.
        labels: ``"auto"`` (a ``.cls`` label from the parent folder when every sample sits exactly
            one folder deep, ImageFolder style, with at least two folders), ``"parent"`` (always)
            or ``"none"``.
        shard_prefix: shard names are ``<shard_prefix>-%06d.tar``. Default ``"shard"``.
        read_concurrency: GETs in flight while reading the source (native reader). Default 64.
        read_inflight_bytes: bytes (B) the reader may hold in flight or unconsumed. Default 256 MiB.
        write_concurrency: threads of boto3's transfer manager per shard upload. Default 8.
        multipart_bytes: part size (B) of multipart uploads; smaller shards are one PUT.
            Default 16 MiB; 5 MiB to 5 GiB (the S3 limits).
        shards_in_flight: shards written at once while the next one is built. Default 2: one
            stream per shard is slow on many stores, and small shards do not use multipart.
        max_memory_bytes: bound on the shard bytes held at once (the shard being built and those
            being written, ``(shards_in_flight + 1) * shard_size``) plus ``read_inflight_bytes``.
            Default 2 GiB.
        manifest_wait_s: seconds (s) a rank other than 0 waits for rank 0's manifest. Default 600.
    """

    shard_size: int = 128 * 10**6
    seed: int = 0
    labels: str = "auto"
    shard_prefix: str = "shard"
    read_concurrency: int = 64
    read_inflight_bytes: int = 256 * MIB
    write_concurrency: int = 8
    multipart_bytes: int = 16 * MIB
    shards_in_flight: int = 2
    max_memory_bytes: int = 2 * GIB
    manifest_wait_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("shard_size", "seed", "read_concurrency", "read_inflight_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name}={value!r} must be an int")
        if not 64 * KIB <= self.shard_size <= 4 * GIB:
            raise ValueError(f"{self.shard_size=} must be between 64 KiB and 4 GiB")
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"{self.seed=} must be between 0 and 2**63 - 1")
        if self.labels not in LABEL_MODES:
            raise ValueError(f"{self.labels=} must be one of {LABEL_MODES}")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.shard_prefix):
            raise ValueError(f"{self.shard_prefix=} must be 1-64 letters, digits, '-' or '_'")
        if not 1 <= self.read_concurrency <= 1024:
            raise ValueError(f"{self.read_concurrency=} must be between 1 and 1024")
        if not 8 * MIB <= self.read_inflight_bytes <= 64 * GIB:
            raise ValueError(f"{self.read_inflight_bytes=} must be between 8 MiB and 64 GiB")
        if not 1 <= self.write_concurrency <= 64:
            raise ValueError(f"{self.write_concurrency=} must be between 1 and 64")
        if not 5 * MIB <= self.multipart_bytes <= 5 * GIB:
            raise ValueError(f"{self.multipart_bytes=} must be between 5 MiB and 5 GiB")
        if not 1 <= self.shards_in_flight <= 16:
            raise ValueError(f"{self.shards_in_flight=} must be between 1 and 16")
        needed = (self.shards_in_flight + 1) * self.shard_size + self.read_inflight_bytes
        if self.max_memory_bytes < needed:
            raise ValueError(
                f"{self.max_memory_bytes=} must be >= (shards_in_flight + 1) * shard_size + "
                "read_inflight_bytes "
                f"({needed} B): lower --shard-size or raise the memory bound"
            )
        if not (math.isfinite(self.manifest_wait_s) and 0 <= self.manifest_wait_s <= 86400):
            raise ValueError(f"{self.manifest_wait_s=} must be between 0 and 86400 seconds")

    @property
    def plan_fields(self) -> dict[str, object]:
        """The fields that decide the shards' bytes."""
        return {
            "shard_size": self.shard_size,
            "seed": self.seed,
            "labels": self.labels,
            "shard_prefix": self.shard_prefix,
        }

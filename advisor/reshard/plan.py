"""The plan: list the source once into a manifest, group files into WebDataset samples, shuffle
them with the seed and pack them by bytes into shards. Pure functions of the manifest and the
plan fields of `ReshardConfig`, so every process and machine computes the same plan.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from advisor.reshard.config import ReshardConfig
from native_loader import ObjectInfo, S3Reader
from native_loader.sample_errors import check_name
from native_loader.tarwriter import member_bytes, split_key, tar_size
from native_loader.uri import is_metadata

MANIFEST_VERSION = 1
PLAN_DIR = "_reshard"
MANIFEST_NAME = f"{PLAN_DIR}/manifest.json"


class PlanError(ValueError):
    """The source cannot be packed as asked (empty, duplicate keys, a different plan in place)."""


@dataclass(frozen=True)
class SourceObject:
    """One listed source object: key relative to the source prefix, size (B), ETag."""

    key: str
    size: int
    etag: str


@dataclass(frozen=True)
class Member:
    """One tar member: its extension (WebDataset field) and the source object it copies."""

    ext: str
    source: SourceObject


@dataclass(frozen=True)
class Sample:
    """Files sharing a key (the path up to the first dot of the basename), plus an optional
    class index from the parent folder."""

    key: str
    members: tuple[Member, ...]
    label: int | None = None

    @property
    def tar_bytes(self) -> int:
        """Bytes this sample adds to a tar (headers and padding included, pax records aside)."""
        sizes = [m.source.size for m in self.members]
        if self.label is not None:
            sizes.append(len(str(self.label)))
        return sum(member_bytes(size) for size in sizes)


@dataclass(frozen=True)
class ShardPlan:
    index: int
    name: str
    samples: tuple[Sample, ...]

    @property
    def tar_bytes(self) -> int:
        return tar_size(sum(s.tar_bytes for s in self.samples))

    @property
    def objects(self) -> int:
        return sum(len(s.members) for s in self.samples)


@dataclass(frozen=True)
class Manifest:
    """The source listing and the plan fields, saved as ``_reshard/manifest.json`` at the
    destination; `plan_id` names the plan every shard marker and the index refer to."""

    source: str
    fields: dict[str, object]
    objects: tuple[SourceObject, ...]

    @property
    def plan_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def to_json(self) -> str:
        body = {
            "version": MANIFEST_VERSION,
            "source": self.source,
            "plan": self.fields,
            "objects": [[o.key, o.size, o.etag] for o in self.objects],
        }
        return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        try:
            body = json.loads(text)
            if body.get("version") != MANIFEST_VERSION:
                raise ValueError(f"version {body.get('version')!r}")
            objects = tuple(SourceObject(str(k), int(s), str(e)) for k, s, e in body["objects"])
            return cls(str(body["source"]), dict(body["plan"]), objects)
        except (ValueError, KeyError, TypeError) as exc:
            raise PlanError(f"{MANIFEST_NAME} at the destination is not readable: {exc}") from None


@dataclass(frozen=True)
class Plan:
    manifest: Manifest
    shards: tuple[ShardPlan, ...]
    classes: tuple[str, ...]
    skipped: tuple[str, ...]  # source keys that are not sample files (no extension, hidden)

    @property
    def samples(self) -> int:
        return sum(len(s.samples) for s in self.shards)

    @property
    def objects(self) -> int:
        return sum(s.objects for s in self.shards)

    @property
    def source_bytes(self) -> int:
        return sum(o.source.size for s in self.shards for x in s.samples for o in x.members)

    @property
    def tar_bytes(self) -> int:
        return sum(s.tar_bytes for s in self.shards)


Progress = Callable[[int], None]  # objects listed so far


def list_source(
    reader: S3Reader,
    source_uri: str,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> tuple[SourceObject, ...]:
    """Every object under the source prefix, keys relative to it, in key order."""
    prefix = source_uri if source_uri.endswith("/") else source_uri + "/"
    listing: Iterable[ObjectInfo] = reader.list(prefix)
    objects: list[SourceObject] = []
    for info in listing:
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt("listing cancelled")
        relative = info.uri[len(prefix) :] if info.uri.startswith(prefix) else info.key
        if not relative or relative.endswith("/") or is_metadata(info.uri, prefix):
            continue  # folder markers, and what the datasets would not read either
        check_name(info.uri)  # a file name that is not UTF-8: nothing can read or pack it
        objects.append(SourceObject(relative, info.size, info.etag))
        if progress is not None and len(objects) % 1000 == 0:
            progress(len(objects))
    if progress is not None:
        progress(len(objects))
    objects.sort(key=lambda o: o.key)
    return tuple(objects)


def make_plan(manifest: Manifest, config: ReshardConfig) -> Plan:
    """Group, label, shuffle and pack; raises PlanError for an empty source or duplicate members."""
    grouped: dict[str, list[Member]] = {}
    skipped: list[str] = []
    for obj in manifest.objects:
        parts = split_key(obj.key)
        if parts is None:
            skipped.append(obj.key)
            continue
        key, ext = parts
        grouped.setdefault(key, []).append(Member(ext, obj))
    if not grouped:
        what = f" ({len(skipped)} files without an extension)" if skipped else ""
        raise PlanError(f"{manifest.source} holds no sample files to pack{what}")
    classes = _classes(list(grouped), config.labels)
    samples = []
    for key in sorted(grouped):
        members = sorted(grouped[key], key=lambda m: m.ext)
        label = classes.index(key.rpartition("/")[0]) if classes else None
        exts = [m.ext for m in members] + (["cls"] if label is not None else [])
        if len(set(exts)) != len(exts):
            dup = next(e for e in exts if exts.count(e) > 1)
            raise PlanError(
                f"duplicate sample member {key}.{dup}: two files would share one key and field"
                + (
                    " (a .cls file next to the folder label; use --labels none)"
                    if dup == "cls"
                    else ""
                )
            )
        samples.append(Sample(key, tuple(members), label))
    random.Random(config.seed).shuffle(samples)
    return Plan(manifest, _pack(samples, config), tuple(classes), tuple(skipped))


def _classes(keys: list[str], mode: str) -> list[str]:
    if mode == "none":
        return []
    folders = {key.rpartition("/")[0] for key in keys}
    if mode == "auto" and (len(folders) < 2 or any(k.count("/") != 1 for k in keys)):
        return []
    return sorted(folders)


def _pack(samples: list[Sample], config: ReshardConfig) -> tuple[ShardPlan, ...]:
    groups: list[list[Sample]] = [[]]
    size = 0
    for sample in samples:
        if groups[-1] and tar_size(size + sample.tar_bytes) > config.shard_size:
            groups.append([])
            size = 0
        groups[-1].append(sample)
        size += sample.tar_bytes
    digits = max(6, math.ceil(math.log10(len(groups) + 1)))
    return tuple(
        ShardPlan(i, f"{config.shard_prefix}-{i:0{digits}d}.tar", tuple(group))
        for i, group in enumerate(groups)
    )


def size_histogram(plan: Plan) -> list[tuple[int, int]]:
    """(lower bound in bytes, shard count) per power-of-two bin of planned shard sizes."""
    bins: dict[int, int] = {}
    for shard in plan.shards:
        lower = 1 << max(0, shard.tar_bytes.bit_length() - 1)
        bins[lower] = bins.get(lower, 0) + 1
    return sorted(bins.items())

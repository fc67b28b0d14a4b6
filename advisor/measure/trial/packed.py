"""A packed sample: what training reads after `reshard-first`. The trial packs a sample of the
listed objects into WebDataset tar shards on local disk, as `python -m advisor reshard` packs
them (`native_loader.tarwriter`: one object is one sample, its member named by the object's key
relative to the listed prefix and its extension), and sweeps them as tar samples, streamed.

Each packed sample is ``{"__key__": key, "<ext>": bytes}``; the trial's transform (the user's,
or the objects' default decoder) applies to its payload, the member that was the object
(`native_loader.decoders.PayloadTransform`), as a transform written for the objects does once
they are packed. Bounded like the local copy (`localcopy`): a share of the trial's budget, the
copy's disk quota, a scratch folder the caller removes.

After packing, SRC-6 reads the shards from local disk (`copy-local`) or streams them from S3.
The first is exactly this read path; the second the trial cannot make without writing to the
bucket, so the model decides it, with the training thread's CPU per sample measured here.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from advisor.measure.trial.data import TrialClock, TrialData
from advisor.measure.trial.localcopy import (
    ENOUGH_BYTES,
    ENOUGH_OBJECTS,
    MIN_OBJECTS,
    CopyUnavailable,
    copy_quota,
)
from native_loader import ObjectInfo
from native_loader.decoders import PayloadTransform
from native_loader.tarwriter import ShardWriter, member_bytes, split_key, tar_size

# The sample is packed into this many shards at least (fewer objects: one each), so that the
# loader's processes read different shards as they would read a packed set's.
PACKED_SHARDS = 4


def member_name(uri: str, prefix: str) -> tuple[str, str] | None:
    """The (key, extension) `advisor reshard` gives the object at `uri` listed under `prefix`:
    its path relative to the prefix, split at the first dot of its name; None where it packs no
    such object (no extension, a hidden file)."""
    relative = uri[len(prefix) :] if uri.startswith(prefix) else uri.rpartition("/")[2]
    return split_key(relative.lstrip("/"))


def _plan(data: TrialData, prefix: str, quota: int) -> list[tuple[ObjectInfo, str, str]]:
    """The sampled objects to pack, in sample order, within the quota and the sample's size:
    one per key (one object is one sample), none that the reshard would not pack."""
    planned: list[tuple[ObjectInfo, str, str]] = []
    keys: set[str] = set()
    total = 0
    for info in data.objects:
        named = member_name(info.uri, prefix)
        if named is None or named[0] in keys:
            continue
        size = member_bytes(info.size)
        if tar_size(total + size) > quota:
            break
        planned.append((info, *named))
        keys.add(named[0])
        total += size
        if total >= ENOUGH_BYTES or len(planned) >= ENOUGH_OBJECTS:
            break
    return planned


def pack_sample(
    data: TrialData, prefix: str, directory: Path, clock: TrialClock, seconds: float
) -> TrialData:
    """Pack the first of `data`'s objects (listed under `prefix`) into tar shards in
    `directory`, for at most `seconds` and the disk quota; those shards read as tar samples,
    the trial's transform applied to each sample's payload. Raises CopyUnavailable naming the
    reason (no room, no permission, no time, nothing the reshard would pack)."""
    try:
        quota = copy_quota(directory)
    except OSError as exc:
        raise CopyUnavailable(f"the scratch folder {directory} is not usable: {exc}") from exc
    planned = _plan(data, prefix, quota)
    if not planned:
        raise CopyUnavailable(
            f"no sampled object fits the disk quota ({quota >> 20} MiB in {directory}) as a "
            "named tar member"
        )
    shards = min(PACKED_SHARDS, len(planned))
    per_shard = -(-len(planned) // shards)
    deadline = time.monotonic() + seconds
    written: list[ObjectInfo] = []
    packed = pending = 0  # objects in the shards written, and in the one being built
    clock.report("copy", f"packing a sample into tar shards on local disk ({directory})")
    objects = [info for info, _, _ in planned]
    writer = ShardWriter()
    try:
        with data.reader() as reader:
            for (info, key, ext), result in zip(planned, reader.read_many(objects), strict=False):
                clock.check()
                if len(result) != info.size:
                    raise CopyUnavailable(
                        f"{info.uri}: read {len(result)} bytes, listed {info.size}"
                    )
                writer.add(f"{key}.{ext}", memoryview(result))
                pending += 1
                late = time.monotonic() > deadline
                if pending == per_shard or late:
                    written.append(_write(writer, directory, len(written)))
                    writer, packed, pending = ShardWriter(), packed + pending, 0
                    clock.report("copy", f"packed {packed} objects into {len(written)} shard(s)")
                if late:
                    break
            if pending:
                written.append(_write(writer, directory, len(written)))
                packed += pending
    except OSError as exc:
        raise CopyUnavailable(f"writing the packed sample failed: {exc}") from exc
    if packed < min(MIN_OBJECTS, len(planned)):
        raise CopyUnavailable(
            f"only {packed} object(s) packed within {seconds:.1f} s and {quota >> 20} MiB: too "
            "few to measure packed reads"
        )
    clock.report("copy", f"packed {packed} objects into {len(written)} tar shard(s)")
    config = dataclasses.replace(data.config, endpoint_url=None)
    # an epoch of training reads every object: as many of these shards as hold them
    shards_per_epoch = (
        None if data.epoch_objects is None else -(-data.epoch_objects * len(written) // packed)
    )
    return dataclasses.replace(
        data, objects=tuple(written), config=config, fmt="tar",
        transform=PayloadTransform(data.transform), samples_per_item=1.0, records=None,
        epoch_objects=shards_per_epoch,
    )  # fmt: skip


def _write(writer: ShardWriter, directory: Path, index: int) -> ObjectInfo:
    name = f"trial-{index:04d}.tar"
    path = directory / name
    body = writer.finish()
    path.write_bytes(body)
    return ObjectInfo(str(path), name, len(body), "")

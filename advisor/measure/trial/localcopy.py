"""A local copy of the trial's sample: what training reads after a copy-local, or from the cache
that later epochs read. The trial sweeps on it as on the listed objects, so the num_workers it
measures is the one for the read path training will use.

The copy goes into a scratch folder the caller removes, within a share of the trial's budget
and a disk quota; objects are checked against their listed size as they land.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

from advisor.core.units import data_size
from advisor.measure.trial.data import TrialClock, TrialData
from advisor.measure.trial.probe_results import SampleCopy
from native_loader import ObjectInfo
from native_loader.local_copy import write_atomically

COPY_QUOTA_BYTES = 2 * 2**30  # the most the sample copy writes
DISK_SHARE = 0.25  # of the scratch folder's free space: the copy leaves the rest alone
ENOUGH_BYTES = 512 * 2**20  # a sample this large holds every count's read-ahead many times over
ENOUGH_OBJECTS = 1000
# fewer than this (unless the sample has no more) and the sweep would cycle one or two objects
# where training reads many: no copy, say why
MIN_OBJECTS = 4


class CopyUnavailable(Exception):
    """The sample could not be copied (no room, no permission, no time): the message says why."""


def copy_quota(directory: Path) -> int:
    """Bytes the copy may write into `directory`: COPY_QUOTA_BYTES, at most DISK_SHARE of the
    free space there."""
    free = shutil.disk_usage(directory).free
    return int(min(COPY_QUOTA_BYTES, DISK_SHARE * free))


def copy_sample(
    data: TrialData, directory: Path, clock: TrialClock, seconds: float
) -> tuple[TrialData, SampleCopy]:
    """Copy the first of `data`'s objects into `directory` for at most `seconds` and the disk
    quota; the same data read from there, and the copy as timed (what a copy-local's copy of
    the whole set runs at, measured). Raises CopyUnavailable naming the reason."""
    try:
        quota = copy_quota(directory)
    except OSError as exc:
        raise CopyUnavailable(f"the scratch folder {directory} is not usable: {exc}") from exc
    objects = [o for o in data.objects if o.size <= quota]
    if not objects:
        raise CopyUnavailable(
            f"no sampled object fits the copy's disk quota ({quota >> 20} MiB in {directory})"
        )
    started = landed = time.monotonic()
    deadline = started + seconds
    copied: list[ObjectInfo] = []
    written = 0
    clock.report("copy", f"copying a sample to local disk ({directory})")
    try:
        with data.reader() as reader:
            for info, result in zip(objects, reader.read_many(objects), strict=False):
                clock.check()
                if len(result) != info.size:
                    raise CopyUnavailable(
                        f"{info.uri}: read {len(result)} bytes, listed {info.size}"
                    )
                name = f"{len(copied):05d}-{os.path.basename(info.uri.rstrip('/')) or 'object'}"
                path = directory / name
                # written as the copy-local's copy writes (flushed to disk, renamed), so the
                # rate timed here is the one the whole copy runs at
                write_atomically(str(path), memoryview(result))
                written += info.size
                landed = time.monotonic()
                copied.append(ObjectInfo(str(path), name, info.size, info.etag))
                if len(copied) % 25 == 0:
                    clock.report(
                        "copy", f"copied {len(copied)} objects, {data_size(written)} locally"
                    )
                full = written + info.size > quota
                enough = written >= ENOUGH_BYTES or len(copied) >= ENOUGH_OBJECTS
                if full or enough or time.monotonic() > deadline:
                    break
    except OSError as exc:
        raise CopyUnavailable(f"writing the sample copy failed: {exc}") from exc
    if len(copied) < min(MIN_OBJECTS, len(objects)):  # the whole sample copied is enough
        raise CopyUnavailable(
            f"only {len(copied)} object(s) copied within {seconds:.1f} s and "
            f"{quota >> 20} MiB: too few to measure local reads"
        )
    clock.report("copy", f"copied {len(copied)} objects, {data_size(written)} locally")
    config = dataclasses.replace(data.config, endpoint_url=None)
    timed = SampleCopy(len(copied), written, landed - started)
    return dataclasses.replace(data, objects=tuple(copied), config=config), timed

"""Re-shard many small objects into deterministic WebDataset tar shards.

    from advisor.reshard import ReshardConfig, reshard
    result = reshard("s3://bucket/images/", "s3://bucket/shards/", ReshardConfig(seed=1))

The same source and seed give byte-identical shards whatever the number of processes or
machines; a rerun resumes; ranks (``RANK``/``WORLD_SIZE`` or arguments) split the shards with
no communication, and the last rank to finish writes ``shards.json``. See docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from advisor.reshard.config import ReshardConfig, parse_size
from advisor.reshard.estimate import Estimate, estimate
from advisor.reshard.execute import (
    ReshardResult,
    finalize_if_complete,
    load_plan,
    read_records,
    resolve_rank,
    run_shards,
    source_prefix,
)
from advisor.reshard.plan import Plan, PlanError
from advisor.reshard.progress import ProgressCallback, ReshardEvent
from advisor.reshard.store import Store, open_store
from advisor.reshard.verify import VerifyReport, verify_shards
from native_loader import Credentials, ReaderConfig, S3Reader

__all__ = [
    "Estimate",
    "PlanError",
    "ReshardConfig",
    "ReshardEvent",
    "ReshardResult",
    "VerifyReport",
    "dry_run",
    "finalize",
    "parse_size",
    "reshard",
    "verify",
]


@contextmanager
def _open(
    source: str | None,
    destination: str,
    config: ReshardConfig,
    endpoint_url: str | None,
    profile: str | None,
    credentials: Credentials | None,
    anonymous_source: bool = False,
) -> Iterator[tuple[str, Store, S3Reader]]:
    # anonymous_source: the reader (which reads the source) sends unsigned requests, for a
    # public bucket; the destination store still writes with the caller's credentials
    reader_config = ReaderConfig(
        endpoint_url=endpoint_url,
        profile=profile,
        max_inflight_requests=config.read_concurrency,
        max_inflight_bytes=config.read_inflight_bytes,
        unsigned=anonymous_source,
    )
    store = open_store(destination, config, endpoint_url, profile, credentials)
    with S3Reader(reader_config, credentials=credentials) as reader:
        yield (source_prefix(source) if source else ""), store, reader


def reshard(
    source: str,
    destination: str,
    config: ReshardConfig | None = None,
    *,
    endpoint_url: str | None = None,
    profile: str | None = None,
    credentials: Credentials | None = None,
    anonymous_source: bool = False,
    rank: int | None = None,
    world_size: int | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ReshardResult:
    """Pack `source` (``s3://bucket/prefix/`` or a folder) into shards at `destination`.

    Rank and world size default to ``RANK``/``WORLD_SIZE`` (0 of 1). Resumes what an earlier
    run with the same settings committed. Raises PlanError (a ValueError) for bad input, OSError
    subclasses for storage failures; with `cancel` set it stops between samples and returns
    with ``cancelled=True``, committed shards kept. `anonymous_source`: the source is a public
    bucket, read with unsigned requests (the destination is written with `credentials`).
    """
    config = config or ReshardConfig()
    rank, world_size = resolve_rank(rank, world_size)
    where = (endpoint_url, profile, credentials, anonymous_source)
    with _open(source, destination, config, *where) as (
        src,
        store,
        reader,
    ):
        plan = load_plan(store, reader, src, config, rank, progress, cancel)
        if progress is not None:
            progress(ReshardEvent("plan", f"{len(plan.shards)} shards, {plan.samples} samples"))
        return run_shards(plan, store, reader, rank, world_size, config, progress, cancel)


def dry_run(
    source: str,
    destination: str,
    config: ReshardConfig | None = None,
    *,
    endpoint_url: str | None = None,
    profile: str | None = None,
    credentials: Credentials | None = None,
    anonymous_source: bool = False,
    progress: ProgressCallback | None = None,
) -> Estimate:
    """The plan's shape and a measured time and request-cost estimate; writes nothing that
    stays (the write probe is deleted)."""
    config = config or ReshardConfig()
    where = (endpoint_url, profile, credentials, anonymous_source)
    with _open(source, destination, config, *where) as (
        src,
        store,
        reader,
    ):
        plan = load_plan(store, reader, src, config, progress=progress, save=False)
        return estimate(plan, store, reader, src, config)


def _saved_plan(store: Store, reader: S3Reader, config: ReshardConfig) -> Plan:
    from advisor.reshard.plan import MANIFEST_NAME, Manifest, make_plan

    saved = store.read(MANIFEST_NAME)
    if saved is None:
        raise PlanError(f"{store.uri} holds no re-shard plan ({MANIFEST_NAME} is missing)")
    manifest = Manifest.from_json(saved.decode())
    fields = {**config.plan_fields, **manifest.fields}
    return make_plan(manifest, ReshardConfig(**fields))  # type: ignore[arg-type]


def finalize(
    destination: str,
    *,
    endpoint_url: str | None = None,
    profile: str | None = None,
    credentials: Credentials | None = None,
) -> str:
    """Write the index once every shard is committed; raises PlanError naming missing shards."""
    config = ReshardConfig()
    with _open(None, destination, config, endpoint_url, profile, credentials) as (_, store, reader):
        plan = _saved_plan(store, reader, config)
        url = finalize_if_complete(plan, store)
        if url is None:
            _, missing = read_records(plan, store)
            raise PlanError(
                f"{len(missing)} of {len(plan.shards)} shards are not committed yet (e.g. "
                f"{', '.join(missing[:3])}): run the remaining ranks, or rerun, first"
            )
        return url


def verify(
    destination: str,
    *,
    endpoint_url: str | None = None,
    profile: str | None = None,
    credentials: Credentials | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> VerifyReport:
    """Re-read every shard at `destination` and check it against the index and manifest."""
    config = ReshardConfig()
    with _open(None, destination, config, endpoint_url, profile, credentials) as (_, store, reader):
        plan = _saved_plan(store, reader, config)
        return verify_shards(plan, store, reader, progress, cancel)

"""Run a plan: read each shard's objects with the native reader, build the tar, write it, verify
it and only then mark it done; the index is written last, by whichever rank sees every shard done.

The commit protocol, per shard: the shard object (whole or absent: a local rename or one S3
PUT/CompleteMultipartUpload), checked for size and checksum, then its marker
``_reshard/done/<shard>.json``. A shard without a marker is rewritten on the next run with the
same bytes; ``shards.json`` names only shards whose marker and object are both in place.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from advisor.reshard.config import ReshardConfig
from advisor.reshard.plan import (
    MANIFEST_NAME,
    PLAN_DIR,
    Manifest,
    Plan,
    PlanError,
    ShardPlan,
    list_source,
    make_plan,
)
from advisor.reshard.progress import Meter, ProgressCallback, ReshardEvent
from advisor.reshard.store import S3Store, Store
from native_loader import ObjectInfo, ReadResult, S3Reader
from native_loader.tarwriter import ShardWriter
from native_loader.uri import uri_scheme

INDEX_NAME = "shards.json"
CLASSES_NAME = "classes.json"
DONE_DIR = f"{PLAN_DIR}/done/"
_POLL_S = 0.5


@dataclass(frozen=True)
class ShardRecord:
    """A committed shard: its marker's content and its entry in the index."""

    name: str
    url: str
    samples: int
    bytes: int
    sha256: str
    plan_id: str


@dataclass(frozen=True)
class ReshardResult:
    destination: str
    plan_id: str
    rank: int
    world_size: int
    shards_total: int  # in the plan
    shards_written: int  # by this run
    shards_skipped: int  # this rank's shards already committed
    samples_written: int
    bytes_written: int
    seconds: float
    index_url: str | None  # set when this run wrote (or found) the complete index
    cancelled: bool = False
    retries: int = 0
    throttled: int = 0
    cleaned: int = 0  # temp files or multipart uploads an interrupted run left, removed


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """Rank and world size: as given, else torchrun's / srun's ``RANK`` and ``WORLD_SIZE``."""
    try:
        r = rank if rank is not None else int(os.environ.get("RANK", "0"))
        w = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ValueError("RANK and WORLD_SIZE must be integers") from None
    if not (w >= 1 and 0 <= r < w):
        raise ValueError(f"rank {r} of world size {w}: need 0 <= rank < world_size")
    return r, w


def source_prefix(source: str) -> str:
    """The source as a listing prefix: ``s3://b/p/`` or an absolute folder path ending in /."""
    if uri_scheme(source) == "s3":
        return source if source.endswith("/") else source + "/"
    path = os.path.abspath(os.path.expanduser(source.removeprefix("file://")))
    if not os.path.isdir(path):
        raise FileNotFoundError(f"source folder {path!r} does not exist")
    return path.rstrip("/") + "/"


def load_plan(
    store: Store,
    reader: S3Reader,
    source: str,
    config: ReshardConfig,
    rank: int = 0,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    save: bool = True,
) -> Plan:
    """The plan for `source`: from the manifest at the destination, else listed (by rank 0; the
    other ranks wait for its manifest) and, with `save`, saved there before any data moves."""
    _check_apart(source, store.uri)
    saved = store.read(MANIFEST_NAME)
    if saved is None and rank > 0:
        if progress is not None:
            progress(
                ReshardEvent(
                    "wait",
                    f"rank {rank}: waiting up to {config.manifest_wait_s:g} s for rank 0's plan "
                    f"({store.url(MANIFEST_NAME)}); start rank 0 with the same arguments",
                )
            )
        saved = _wait_for_manifest(store, config.manifest_wait_s, cancel)
    if saved is not None:
        manifest = Manifest.from_json(saved.decode())
        _check_same_plan(manifest, source, config, store.uri)
        return make_plan(manifest, config)
    if save:
        store.clean_interrupted([MANIFEST_NAME])  # a run killed while saving the plan
        leftovers = [n for n in store.names() if not n.startswith(".")]
        if leftovers:
            raise PlanError(
                f"the destination {store.uri} is not empty ({len(leftovers)} objects, e.g. "
                f"{leftovers[0]!r}) and holds no re-shard plan: choose an empty destination"
            )

    def listed(count: int) -> None:
        if progress is not None:
            progress(ReshardEvent("listing", f"listed {count:,} objects"))

    objects = list_source(reader, source, listed, cancel)
    if not objects:
        raise PlanError(f"the source {source} holds no objects: check the bucket, prefix or folder")
    manifest = Manifest(source, config.plan_fields, objects)
    plan = make_plan(manifest, config)  # bad input fails here, before anything is written
    if save:
        store.put_small(MANIFEST_NAME, manifest.to_json().encode())
    return plan


def _check_apart(source: str, destination: str) -> None:
    """Refuse a destination inside the source, symlinks resolved: its shards would land in the
    source, and the next re-shard of that source would pack them as samples."""
    if (uri_scheme(source) == "s3") != (uri_scheme(destination) == "s3"):
        return
    src, dst = source, destination
    if uri_scheme(source) != "s3":
        src, dst = os.path.realpath(source) + "/", os.path.realpath(destination) + "/"
    if dst.startswith(src):
        shown = destination if dst == destination else f"{destination} (that is, {dst})"
        raise PlanError(
            f"the destination {shown} lies inside the source {source}: choose a destination "
            "outside it"
        )


def _wait_for_manifest(store: Store, wait_s: float, cancel: threading.Event | None) -> bytes:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt("cancelled while waiting for rank 0's manifest")
        time.sleep(_POLL_S)
        saved = store.read(MANIFEST_NAME)
        if saved is not None:
            return saved
    raise TimeoutError(f"no {MANIFEST_NAME} from rank 0 at {store.uri} after {wait_s:g} s")


def _check_same_plan(manifest: Manifest, source: str, config: ReshardConfig, dst: str) -> None:
    differences = [
        f"{name} {manifest.fields.get(name)!r} (asked {value!r})"
        for name, value in config.plan_fields.items()
        if manifest.fields.get(name) != value
    ]
    if manifest.source != source:
        differences.insert(0, f"source {manifest.source} (asked {source})")
    if differences:
        raise PlanError(
            f"the destination {dst} already holds a different re-shard plan: "
            + "; ".join(differences)
            + ". Rerun with the same settings to resume, or choose another destination"
        )


def committed(store: Store) -> set[str]:
    """Names of shards whose done marker exists."""
    return {n[len(DONE_DIR) : -len(".json")] for n in store.names(DONE_DIR) if n.endswith(".json")}


def run_shards(
    plan: Plan,
    store: Store,
    reader: S3Reader,
    rank: int,
    world_size: int,
    config: ReshardConfig,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ReshardResult:
    """Write this rank's uncommitted shards, then the index if every shard is committed."""
    started = time.monotonic()
    plan_id = plan.manifest.plan_id
    source = plan.manifest.source
    mine = [s for s in plan.shards if s.index % world_size == rank]
    done = committed(store)
    todo = [s for s in mine if s.name not in done]
    total_bytes = sum(o.source.size for s in todo for x in s.samples for o in x.members)
    meter = Meter(progress, len(mine), total_bytes)
    meter.shards_done = len(mine) - len(todo)
    cleaned = store.clean_interrupted(
        [n for s in todo for n in (s.name, f"{DONE_DIR}{s.name}.json")]
    )
    if cleaned:
        what = "incomplete multipart uploads" if isinstance(store, S3Store) else "temp files"
        meter.emit("cleanup", f"cleaned up {cleaned} {what} an interrupted run left")
    if meter.shards_done:
        meter.emit("skip", f"{meter.shards_done} of this rank's shards already committed")

    def infos() -> Iterator[ObjectInfo]:
        for shard in todo:
            for sample in shard.samples:
                for m in sample.members:
                    yield ObjectInfo(source + m.source.key, m.source.key, m.source.size, "")

    records: list[ShardRecord] = []
    cancelled = False
    pending: collections.deque[concurrent.futures.Future[ShardRecord]] = collections.deque()
    slots = config.shards_in_flight
    with concurrent.futures.ThreadPoolExecutor(slots, thread_name_prefix="reshard-write") as pool:
        results = reader.read_many(infos())
        try:
            for shard in todo:
                data = _build(shard, results, meter, cancel)
                if data is None:
                    cancelled = True
                    break
                while len(pending) >= slots:  # bounded: `slots` shards written, one built
                    records.append(pending.popleft().result())
                    _committed(meter, records[-1], reader, store)
                pending.append(pool.submit(_commit, store, shard, data, plan_id))
            while pending:
                records.append(pending.popleft().result())
                _committed(meter, records[-1], reader, store)
        finally:
            results.close()  # type: ignore[attr-defined]  # cancels reads in flight
            for future in pending:
                future.result()  # shards being written finish their commit (or fail)
    index_url = None
    if not cancelled:
        meter.emit("done", f"rank {rank}: {meter.shards_done} of {len(mine)} shards committed")
        index_url = finalize_if_complete(plan, store, progress)
    return ReshardResult(
        destination=store.uri,
        plan_id=plan_id,
        rank=rank,
        world_size=world_size,
        shards_total=len(plan.shards),
        shards_written=len(records),
        shards_skipped=len(mine) - len(todo),
        samples_written=sum(r.samples for r in records),
        bytes_written=sum(r.bytes for r in records),
        seconds=round(time.monotonic() - started, 3),
        index_url=index_url,
        cancelled=cancelled,
        retries=meter.retries,
        throttled=meter.throttled,
        cleaned=cleaned,
    )


def _build(
    shard: ShardPlan,
    results: Iterator[ReadResult],
    meter: Meter,
    cancel: threading.Event | None,
) -> bytes | None:
    """The shard's tar bytes (each sample's members contiguous, sorted by extension), or None
    when cancelled."""
    writer = ShardWriter()
    for sample in shard.samples:
        if cancel is not None and cancel.is_set():
            return None
        parts: dict[str, bytes | memoryview] = {}
        for member in sample.members:
            result = next(results)
            view = memoryview(result)
            if len(view) != member.source.size:  # S3 reads check this in the engine; files here
                raise OSError(
                    f"{result.uri}: the object changed since the plan: its size is {len(view)} "
                    f"bytes, not the {member.source.size} expected. Re-shard into a new "
                    "destination to plan again"
                )
            parts[member.ext] = view
            meter.bytes_done += len(view)
        if sample.label is not None:
            parts["cls"] = str(sample.label).encode()
        for ext in sorted(parts):
            writer.add(f"{sample.key}.{ext}", parts[ext])
        meter.samples_done += 1
        meter.emit("progress", f"writing {shard.name}", force=False)
    return writer.finish()


def _commit(store: Store, shard: ShardPlan, data: bytes, plan_id: str) -> ShardRecord:
    written = store.put_shard(shard.name, data)
    expected = hashlib.sha256(data).hexdigest()
    if written.size != len(data) or written.sha256 != expected:
        raise OSError(
            f"{store.url(shard.name)}: the stored shard does not match what was written "
            f"({written.size} B, sha256 {written.sha256[:12]}; expected {len(data)} B, "
            f"{expected[:12]}); it is not marked done and will be rewritten on the next run"
        )
    record = ShardRecord(
        shard.name, store.url(shard.name), len(shard.samples), len(data), expected, plan_id
    )
    store.put_small(f"{DONE_DIR}{shard.name}.json", json.dumps(record.__dict__).encode())
    return record


def _committed(meter: Meter, record: ShardRecord, reader: S3Reader, store: Store) -> None:
    meter.shards_done += 1
    meter.retries = reader.stats()["retries"] + (store.retries if isinstance(store, S3Store) else 0)
    meter.throttled = store.throttled if isinstance(store, S3Store) else 0
    meter.emit("shard", f"committed {record.name} ({record.samples} samples)")


def read_records(plan: Plan, store: Store) -> tuple[list[ShardRecord], list[str]]:
    """Markers of the plan's committed shards, and the names of those not committed."""
    done = committed(store)
    missing = [s.name for s in plan.shards if s.name not in done]
    names = [s.name for s in plan.shards if s.name in done]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        raw = list(pool.map(lambda n: store.read(f"{DONE_DIR}{n}.json"), names))
    records = []
    for name, body in zip(names, raw, strict=True):
        if body is None:
            missing.append(name)
            continue
        record = ShardRecord(**json.loads(body))
        if record.plan_id != plan.manifest.plan_id:
            raise PlanError(f"{name}'s marker belongs to another plan ({record.plan_id})")
        records.append(record)
    return records, missing


def finalize_if_complete(
    plan: Plan, store: Store, progress: ProgressCallback | None = None
) -> str | None:
    """Write ``classes.json`` and ``shards.json`` when every shard is committed and in place;
    returns the index URL, or None while shards are missing."""
    records, missing = read_records(plan, store)
    if missing:
        return None
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        sizes = list(pool.map(lambda r: store.size(r.name), records))
    for record, size in zip(records, sizes, strict=True):
        if size != record.bytes:
            store.delete(f"{DONE_DIR}{record.name}.json")  # rewritten by the next run
            raise OSError(
                f"{record.url} is {size} B but was committed with {record.bytes} B: its marker "
                "is removed; rerun to rewrite it"
            )
    store.clean_interrupted([CLASSES_NAME, INDEX_NAME])  # a finalizer killed mid-write
    if plan.classes:
        store.put_small(CLASSES_NAME, json.dumps(list(plan.classes), ensure_ascii=False).encode())
    index = {
        "__kind__": "wids-shard-index-v1",
        "wids_version": 1,
        "plan_id": plan.manifest.plan_id,
        "source": plan.manifest.source,
        "samples": plan.samples,
        "classes": list(plan.classes),
        "shardlist": [
            {"url": r.url, "nsamples": r.samples, "filesize": r.bytes, "sha256": r.sha256}
            for r in records
        ],
    }
    store.put_small(INDEX_NAME, json.dumps(index, indent=1, ensure_ascii=False).encode())
    if progress is not None:
        progress(ReshardEvent("finalized", f"wrote {store.url(INDEX_NAME)}"))
    return store.url(INDEX_NAME)

"""`--verify`: re-read every shard and check it against the index and the source manifest."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass

from advisor.reshard.execute import INDEX_NAME, read_records
from advisor.reshard.plan import Plan
from advisor.reshard.progress import ProgressCallback, ReshardEvent
from advisor.reshard.store import Store
from native_loader import ObjectInfo, S3Reader
from native_loader.tar import iter_members

_MD5_ETAG = re.compile(r'^"?([0-9a-f]{32})"?$')


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` read and every mismatch it found (empty `problems`: all good)."""

    shards_checked: int
    samples_checked: int
    members_checked: int
    md5_checked: int  # members compared with the source ETag (single-part S3 uploads)
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_shards(
    plan: Plan,
    store: Store,
    reader: S3Reader,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> VerifyReport:
    """Each committed shard's size and sha256 against its marker and the index; its members'
    names, order, sizes (and MD5 where the source ETag is one) against the manifest."""
    problems: list[str] = []
    records, missing = read_records(plan, store)
    problems += [f"{name}: not committed" for name in missing]
    index = store.read(INDEX_NAME)
    if index is None:
        problems.append(f"{INDEX_NAME}: missing (not finalized)")
    else:
        listed = {e["url"]: e for e in json.loads(index)["shardlist"]}
        for r in records:
            entry = listed.get(r.url)
            if entry is None or entry["sha256"] != r.sha256 or entry["filesize"] != r.bytes:
                problems.append(f"{r.name}: the index entry does not match its commit marker")
    by_name = {s.name: s for s in plan.shards}
    samples = members = md5s = 0
    infos = (ObjectInfo(r.url, r.name, -1, "") for r in records)
    for record, data in zip(records, reader.read_many(infos), strict=True):
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt("verify cancelled")
        digest = hashlib.sha256(memoryview(data)).hexdigest()
        if len(data) != record.bytes or digest != record.sha256:
            problems.append(
                f"{record.name}: {len(data)} B, sha256 {digest[:12]} but committed as "
                f"{record.bytes} B, {record.sha256[:12]}"
            )
            continue
        expected = []
        for sample in by_name[record.name].samples:
            parts = {m.ext: m.source for m in sample.members}
            for ext in sorted([*parts, *(["cls"] if sample.label is not None else [])]):
                expected.append((f"{sample.key}.{ext}", parts.get(ext), sample.label))
        found = list(iter_members(data))
        if [n for n, *_ in expected] != [n for n, _ in found]:
            problems.append(f"{record.name}: member names or order differ from the plan")
            continue
        for (name, source, label), (_, body) in zip(expected, found, strict=True):
            members += 1
            if source is None:
                if bytes(body) != str(label).encode():
                    problems.append(f"{record.name}: {name} holds {bytes(body)!r}, not {label}")
            elif len(body) != source.size:
                problems.append(f"{record.name}: {name} is {len(body)} B, source {source.size} B")
            elif match := _MD5_ETAG.match(source.etag):
                md5s += 1
                if hashlib.md5(body, usedforsecurity=False).hexdigest() != match.group(1):
                    problems.append(f"{record.name}: {name} differs from the source (MD5)")
        samples += len(by_name[record.name].samples)
        if progress is not None:
            progress(ReshardEvent("verify", f"verified {record.name}"))
    return VerifyReport(len(records), samples, members, md5s, tuple(problems))

"""The demo's S3 store kept across kernels: SeaweedFS's data folder as it stood after the upload.

A second kernel starts its server on a copy of it instead of uploading the cached files again
(copying a few hundred MB takes well under a second; uploading them took about nine). The copy,
never the kept folder, is what the server runs on, so the cache is never written by a server.

The store holds no address: the filer's entries point at volume ids, and a server started on new
ports finds its volumes in the folder. Left out are what belongs to one run: its log, its options
file (the old ports) and its master's folder (`m<port>`; a new master learns the volumes, their
ids and the highest file key from the volume server).

A kept store is used only when its name matches (demo data version, spec, layouts, the `weed`
binary and STORE_FORMAT) and its stamp is there; the stamp also says how many objects and bytes
each layout holds, which the restored server must list back, and each file's size and SHA-256,
which the copy must match (a volume changed on disk, a zeroed JPEG in it, is not served: the
store is discarded and the data uploaded again). A store is written beside its final name, then
renamed, so a half-written one is never seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.demo.datasets import DEMO_BUCKET, DemoCache
from advisor.demo.digests import Digests, copy_checked, folder_digests
from advisor.demo.server import weed_binary

if TYPE_CHECKING:
    from advisor.demo.server import S3Endpoint

# Bump when what is kept, or how it is read back, changes.
STORE_FORMAT = 1
STAMP = "store.json"
_PER_RUN = re.compile(r"weed\.log|mini\.options|m\d+")

# layout -> [objects, bytes], as listed from the bucket
Summary = dict[str, list[int]]


def _weed_identity() -> str:
    """Changes when the `weed` binary does (its on-disk format is its own)."""
    stat = weed_binary().stat()
    return f"{stat.st_size}-{stat.st_mtime_ns}"


def bucket_summary(endpoint: S3Endpoint, bucket: str = DEMO_BUCKET) -> Summary:
    """Objects and bytes under each top-level prefix (layout) of `bucket`."""
    client = endpoint.boto3_client()
    summary: Summary = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            counts = summary.setdefault(obj["Key"].split("/", 1)[0], [0, 0])
            counts[0] += 1
            counts[1] += obj["Size"]
    return summary


def _top(root: Path, pattern: str) -> Callable[[str, list[str]], Iterable[str]]:
    """A `copytree` ignore: the names directly in `root` that match `pattern` in full."""

    def ignore(folder: str, names: list[str]) -> Iterable[str]:
        if Path(folder) != root:
            return []
        return [name for name in names if re.fullmatch(pattern, name)]

    return ignore


class StoreSnapshot:
    """The kept server data folder for one demo cache and one set of layouts."""

    def __init__(self, cache: DemoCache, layouts: Sequence[str]) -> None:
        key = f"{STORE_FORMAT}|{'+'.join(sorted(layouts))}|{_weed_identity()}"
        self.layouts = sorted(layouts)
        self.folder = cache.folder / f"store-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def stamp(self) -> Summary | None:
        """What the kept store holds (layout -> [objects, bytes]); None when there is none."""
        kept = self._stamp()
        return None if kept is None else kept[0]

    def _stamp(self) -> tuple[Summary, Digests] | None:
        """(summary, the digest of each file); None without a whole stamp (or one from before
        stores recorded their files' digests)."""
        try:
            stamp = json.loads((self.folder / STAMP).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(stamp, dict) or stamp.get("layouts") != self.layouts:
            return None
        summary, files = stamp.get("summary"), stamp.get("files")
        if not isinstance(summary, dict) or not isinstance(files, dict):
            return None
        return summary, files

    def restore_into(self, data_dir: Path) -> Summary | None:
        """Copy the kept store into the empty `data_dir`; its stamp, or None (and `data_dir`
        left empty) when there is no kept store or the copy failed."""
        kept = self._stamp()
        if kept is None:
            return None
        summary, files = kept
        try:
            ignore = _top(self.folder, re.escape(STAMP))
            whole = copy_checked(self.folder, data_dir, files, ignore)
        except OSError:
            empty_folder(data_dir)
            return None
        if not whole:  # changed on disk since it was kept: of no use to anyone
            empty_folder(data_dir)
            self.discard()
            return None
        return summary

    def save_from(self, data_dir: Path, summary: Summary) -> None:
        """Keep a copy of the stopped server's `data_dir`, which holds `summary`. Raises OSError;
        a store another process finished first is kept instead of this one."""
        partial = self.folder.with_name(f"{self.folder.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            shutil.copytree(data_dir, partial, ignore=_top(data_dir, _PER_RUN.pattern))
            files = folder_digests(partial)
            stamp = {"layouts": self.layouts, "summary": summary, "files": files}
            (partial / STAMP).write_text(json.dumps(stamp) + "\n")
            if self.folder.exists() and self.stamp() is None:
                self.discard()  # a store without a readable stamp is of no use to anyone
            partial.rename(self.folder)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
            if self.stamp() is None:  # not a store that another kernel kept first
                raise

    def discard(self) -> None:
        """Remove the kept store (one that did not list back what its stamp says): renamed
        away first, so that no kernel starts copying it while it is being deleted."""
        doomed = self.folder.with_name(f"{self.folder.name}.discarded-{os.getpid()}")
        try:
            self.folder.rename(doomed)
        except OSError:
            return
        shutil.rmtree(doomed, ignore_errors=True)


def empty_folder(folder: Path) -> None:
    """Delete what is in `folder`, keeping the folder."""
    for child in list(folder.iterdir()) if folder.is_dir() else ():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)

"""The local copy a copy-local loader reads: the objects under an S3 prefix as files in a folder.

A copy is the listing's, never something else's. Beside the files it keeps (names starting with
``_`` or ``.`` are metadata: a listing of the copy leaves them out):

- ``_source.json``: where it was copied from (endpoint, bucket and prefix). A copy of another
  source is refused, never read or overwritten, with one exception: the same bucket and prefix
  on another endpoint whose listing is the copy's manifest exactly (every key, size and ETag:
  the same data served elsewhere, as the Loader Advisor demo is on each kernel's port) is that
  endpoint's copy too, and is recorded as its.
- ``_manifest.json``: ``key -> [size, ETag]`` of every file copied, as the listing gave them.
- ``_complete``: written once every listed object was checked or copied.
- ``_last_copy.json``: the last sync that fetched anything, as it ran (`CopyReport`: objects
  and bytes in the copy, those fetched, and its seconds): what the copy measured, for whoever
  reports on it. A sync that finds the copy up to date leaves it as it was.
- ``_lock``: `fcntl.flock`-ed while a process copies, so that processes, ranks or notebooks on
  one node making the same copy take turns: one copies, the others wait and then find it made.

Each object is the file of its key below the prefix; a key ending in ``/`` that has bytes is the
file ``<name>%2F`` (``d/`` beside ``d/x``: the file ``d%2F`` beside the folder ``d``), a folder
marker (``/`` and no bytes) is no file, and keys one folder cannot hold apart (``a`` beside
``a/b``) are refused before anything is copied.

`copy_to_local` makes the copy or brings it up to date with the listing: objects already copied
with their listed size and ETag are kept, changed and new ones fetched, removed ones deleted.
Each file is written under a hidden temporary name in its folder, flushed to disk (fsync) and
renamed, so a crash leaves the old file or the whole new one. `local_copy_state` says whether a
copy is the listing's, for a loader about to read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from native_loader.config import Credentials, ReaderConfig
from native_loader.copy_layout import copy_path, copy_paths, data_files
from native_loader.copy_space import CopyLeft, check_room, full_disk_said
from native_loader.results import ObjectInfo
from native_loader.uri import is_metadata, parse_uri

MANIFEST = "_manifest.json"
SOURCE = "_source.json"
COMPLETE = "_complete"
LOCK = "_lock"
LAST_COPY = "_last_copy.json"
LOCK_WAIT_S = 600.0  # how long a waiter gives a copying process to finish its next object
_LOCK_POLL_S = 0.2
_TMP = ".tmp"  # temporaries are ".<name>.<pid>.tmp": hidden, so never read as data


@dataclass(frozen=True)
class CopySource:
    """What a copy is a copy of. `endpoint` is the S3 endpoint URL ("" for AWS's own)."""

    endpoint: str
    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix} on {self.endpoint or 'AWS S3'}"


@dataclass(frozen=True)
class CopyReport:
    """One sync of a copy, as it ran: the copy holds `objects` objects of `bytes` bytes, of which
    `copied_objects` (`copied_bytes`) were fetched and the rest kept; the sync (the listing, the
    fetches and the writes flushed to disk) took `seconds`, and ended at `finished` (Unix time)."""

    objects: int
    bytes: int
    copied_objects: int
    copied_bytes: int
    seconds: float
    finished: float

    @property
    def bytes_per_s(self) -> float:
        """The rate the fetched bytes landed at (0: nothing fetched)."""
        return self.copied_bytes / self.seconds if self.copied_bytes and self.seconds > 0 else 0.0


def last_copy(directory: str | os.PathLike[str]) -> CopyReport | None:
    """The last sync that fetched anything into the copy in `directory` (None: none recorded
    there)."""
    recorded = _read_json(os.path.join(os.path.expanduser(os.fspath(directory)), LAST_COPY))
    try:
        return CopyReport(**recorded) if isinstance(recorded, dict) else None
    except TypeError:
        return None  # another version's record: none that this one vouches for


def copy_source(uri: str, config: ReaderConfig) -> CopySource:
    scheme, bucket, prefix = parse_uri(uri)
    if scheme != "s3":
        raise ValueError(f"a local copy is made of an s3:// prefix, not {uri!r}")
    # the endpoint the reader will use (the environment may name one); AWS's own is ""
    endpoint = config.endpoint_url or ""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        endpoint = endpoint or os.environ.get(name, "")
    return CopySource(endpoint, bucket, prefix)


def local_copy_complete(directory: str | os.PathLike[str]) -> bool:
    """True when a copy was finished in `directory`. It says nothing about whether the copy is
    still its source's: loader modules exported before copies were checked against their listing
    call it, and are told to export again; `local_copy_state` is the check."""
    warnings.warn(
        "this loader module reads its local copy without checking it against the data set's "
        "listing (a copy of changed or other data could be read): export it again",
        stacklevel=2,
    )
    return os.path.exists(os.path.join(os.path.expanduser(os.fspath(directory)), COMPLETE))


def local_copy_state(
    uri: str,
    directory: str | os.PathLike[str],
    *,
    config: ReaderConfig | None = None,
    credentials: Credentials | None = None,
) -> str | None:
    """None when the copy in `directory` is the listing of `uri` as it is now (every listed
    object there with its size and ETag, nothing else); otherwise why not, as the end of a
    sentence ("is stale: 60 new objects"), for `copy_to_local` to fix. Lists `uri` once.
    Raises ValueError for a folder that holds a copy of another source."""
    from native_loader.reader import S3Reader

    config = config or ReaderConfig()
    root = os.path.expanduser(os.fspath(directory))
    source = copy_source(uri, config)
    recorded = _read_json(os.path.join(root, SOURCE))
    if recorded is None and os.path.exists(os.path.join(root, MANIFEST)):
        return "was made by an earlier version, which did not record its source"
    if recorded is None or not os.path.exists(os.path.join(root, COMPLETE)):
        return "is not made yet"
    with S3Reader(config, credentials=credentials) as reader:
        listed = _listed(reader, uri)
    manifest = _manifest(root)
    if _check_source(root, recorded, source, listed, manifest):
        return "was made from another endpoint serving the same data (to record as this one)"
    wanted = {o.key: [o.size, o.etag] for o in listed}
    new = sum(1 for key in wanted if key not in manifest)
    changed = sum(1 for key, entry in wanted.items() if key in manifest and manifest[key] != entry)
    removed = sum(1 for key in manifest if key not in wanted)
    damaged = sum(1 for o in listed if _size(copy_path(root, source.prefix, o.key)) != o.size)
    known = {copy_path(root, source.prefix, key) for key in [*wanted, *manifest]}
    stray = len(data_files(root) - known)  # neither listed nor copied: a crash's leftover
    counts = {
        "new objects": new,
        "changed objects": changed,
        "objects removed at the source": removed,
        "files of another size than listed": damaged,
        "files not in the listing": stray,
    }
    if not any(counts.values()):
        return None
    return "is stale: " + ", ".join(f"{n:,} {label}" for label, n in counts.items() if n)


def copy_to_local(
    uri: str,
    directory: str | os.PathLike[str],
    *,
    config: ReaderConfig | None = None,
    credentials: Credentials | None = None,
    progress: Callable[[str], None] | None = print,
    wait_s: float = LOCK_WAIT_S,
) -> str:
    """Make `directory` the copy of every object under `uri` (the layout of the keys below the
    prefix), so that training reads local files; returns the folder.

    Resumable and refreshing: an object already copied with its listed size and ETag is kept,
    a changed, new or partly written one is fetched, one no longer listed is deleted. A folder
    holding a copy of another source, or files this copy did not write, is refused
    (ValueError). Another process copying into the folder is waited for while it finishes an
    object at least every `wait_s` seconds (TimeoutError past that). `progress` gets a line
    every 5% of the bytes. A copy that does not fit its disk is an OSError (ENOSPC) naming the
    folder, the space free and the space needed (`native_loader.copy_space`)."""
    from native_loader.reader import S3Reader

    config = config or ReaderConfig()
    root = os.path.expanduser(os.fspath(directory))
    source = copy_source(uri, config)
    os.makedirs(root, exist_ok=True)
    left = CopyLeft()
    with (
        full_disk_said(root, left),
        _locked(root, wait_s, progress),
        S3Reader(config, credentials=credentials) as reader,
    ):
        _sync(root, uri, source, reader, progress, left)
    return root


def _sync(
    root: str, uri: str, source: CopySource, reader: Any, progress: Any, left: CopyLeft
) -> None:
    """`copy_to_local`'s work, with the folder's lock held; `left`: what it has still to write."""
    started = time.monotonic()
    recorded = _read_json(os.path.join(root, SOURCE))
    manifest = _manifest(root)
    listed = _listed(reader, uri)
    if recorded is not None:
        _check_source(root, recorded, source, listed, manifest)
    targets = copy_paths(root, source.prefix, listed)
    ours = set(targets.values()) | {copy_path(root, source.prefix, key) for key in manifest}
    foreign = sorted(
        path
        for path in data_files(root) - ours
        if not (path.endswith(".part") and path[: -len(".part")] in ours)  # earlier versions'
    )
    if foreign:
        shown = ", ".join(os.path.relpath(p, root) for p in foreign[:3])
        raise ValueError(
            f"{root} holds {len(foreign):,} files that are not from {source} ({shown}, ...): "
            "remove them, or give the copy a folder of its own"
        )
    left.bytes = left.total = sum(o.size for o in listed)  # at most: known once checked below
    left.objects = len(listed)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(root, COMPLETE))  # complete again only once this sync ends
    _write_json(os.path.join(root, SOURCE), asdict(source))
    for path in data_files(root) - set(targets.values()):  # removed at the source, old .part
        os.remove(path)
    manifest = {key: entry for key, entry in manifest.items() if key in targets}
    _write_json(os.path.join(root, MANIFEST), manifest)

    def kept(info: ObjectInfo) -> bool:
        return manifest.get(info.key) == [info.size, info.etag] and (
            _size(targets[info.key]) == info.size
        )

    total = sum(o.size for o in listed)
    todo = [o for o in listed if not kept(o)]
    done = total - sum(o.size for o in todo)
    fetched = total - done
    left.bytes, left.objects = fetched, len(todo)
    check_room(root, left, replaced=sum(max(_size(targets[o.key]), 0) for o in todo))
    step, next_report = max(total // 20, 1), done
    if progress is not None:
        mib = total / 2**20
        progress(f"copying {len(todo):,} of {len(listed):,} objects ({mib:,.1f} MiB in all)")
    for info, result in zip(todo, reader.read_many(todo), strict=True):
        if len(result) != info.size:
            raise OSError(f"{info.uri}: read {len(result)} bytes, listed {info.size}")
        write_atomically(targets[info.key], memoryview(result))
        manifest[info.key] = [info.size, info.etag]
        left.wrote(info.size)
        os.utime(os.path.join(root, LOCK))  # a sign of progress for processes waiting
        done += info.size
        if done >= next_report:
            _write_json(os.path.join(root, MANIFEST), manifest)
            next_report = done + step
            if progress is not None:
                share = f"{done / total:.0%}" if total else "100%"
                progress(f"copied {done / 2**20:,.1f} of {total / 2**20:,.1f} MiB ({share})")
    _write_json(os.path.join(root, MANIFEST), manifest)
    write_atomically(os.path.join(root, COMPLETE), (uri + "\n").encode())
    if todo:  # a check that fetched nothing keeps the record of the sync that made the copy
        report = CopyReport(
            len(listed), total, len(todo), fetched, time.monotonic() - started, time.time()
        )
        _write_json(os.path.join(root, LAST_COPY), asdict(report))


def write_atomically(path: str, data: Any, *more: Any) -> None:
    """Write `data` (then each of `more`, bytes-like, in order) to `path` so that a crash
    leaves the old file or the whole new one: a hidden temporary in the same folder
    (``.<name>.<pid>.tmp``), flushed to disk, then renamed over `path`, and the folder flushed
    so that the rename survives a crash too. The local copy, the reshard's local shards and
    the saved listings (`native_loader.index`) write this way."""
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}{_TMP}")
    try:
        with open(tmp, "wb") as out:
            for chunk in (data, *more):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fd = os.open(folder or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(root: str, wait_s: float, progress: Callable[[str], None] | None) -> Iterator[None]:
    """Hold the folder's lock. A waiter gives up when the holder (whose pid the lock file holds)
    finished no object for `wait_s` seconds: the holder touches the lock file after each."""
    import fcntl

    path = os.path.join(root, LOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        last_progress, told = time.monotonic(), False
        seen = os.fstat(fd).st_mtime_ns
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            if progress is not None and not told:
                progress(f"waiting for process {holder}, which is copying into {root}")
                told = True
            mtime = os.fstat(fd).st_mtime_ns
            if mtime != seen:
                seen, last_progress = mtime, time.monotonic()
            elif time.monotonic() - last_progress > wait_s:
                raise TimeoutError(
                    f"process {holder} holds the lock of the local copy in {root} and copied "
                    f"no object for {wait_s:g} s: stop it (or wait for it), then prepare again"
                )
            time.sleep(_LOCK_POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _check_source(
    root: str, recorded: Any, source: CopySource, listed: list[ObjectInfo], manifest: Any
) -> bool:
    """Refuse a copy of another source (ValueError); True when it is the copy of the same
    bucket and prefix on another endpoint whose listing is the manifest exactly (to record)."""
    if recorded == asdict(source):
        return False
    place = {"bucket": source.bucket, "prefix": source.prefix}
    same_place = isinstance(recorded, dict) and {k: recorded.get(k) for k in place} == place
    if same_place and manifest and manifest == {o.key: [o.size, o.etag] for o in listed}:
        return True
    try:
        other: Any = CopySource(**recorded)
    except TypeError:
        other = recorded
    raise ValueError(
        f"{root} holds the local copy of {other}, not of {source}: give this loader a "
        "local_copy_dir of its own (or export it again)"
    )


def _listed(reader: Any, uri: str) -> list[ObjectInfo]:
    """The objects a copy holds: the listing's data objects, as the datasets read them (no
    metadata, no folder markers; an empty object is an empty file)."""
    return [o for o in reader.list(uri) if not o.is_folder_marker and not is_metadata(o.uri, uri)]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _read_json(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None  # absent or unreadable (a crash in an earlier version's write): not vouched


def _manifest(root: str) -> dict[str, Any]:
    """The copy's `key -> [size, ETag]`; empty when absent or not a mapping (vouches for none)."""
    manifest = _read_json(os.path.join(root, MANIFEST))
    return manifest if isinstance(manifest, dict) else {}


def _write_json(path: str, value: Any) -> None:
    write_atomically(path, json.dumps(value).encode())

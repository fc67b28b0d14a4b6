"""A dataset's listing: the data objects under a prefix, as a compact `ObjectIndex`, listed once
and saved, so that later epochs, later runs and the other ranks of a node load it instead of
listing again.

A saved index lives in the dataset's index folder (by default its ``cache_dir``; an exported
loader's is the home cache's, `DEFAULT_INDEX_DIR`) as ``listing-<sha256>.index``, keyed by the
endpoint, the prefix and whether only ``.tar`` objects count (never the credentials; its header
names the prefix and the endpoint without any user part, for `python -m advisor cache`). It is
used while it is younger than ``max_age_s`` (default 24 h) and listed again past that, or when
asked (``refresh=True``): the local copy is checked against the listing at every start; an index
cannot be, without listing, so it has an age. The processes of a node take turns (a lock file
beside it): one lists and saves, the others wait and then load what it saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from native_loader.config import ReaderConfig
from native_loader.index import IndexBuilder, ObjectIndex, load
from native_loader.reader import ObjectInfo, S3Reader
from native_loader.uri import is_metadata, parse_uri

DEFAULT_INDEX_MAX_AGE_S = 24 * 3600.0
# the home cache: what the advisor and its exported loaders keep on local disk (local copies,
# caches, saved listings), listed and freed by `python -m advisor cache`; `~` is expanded where
# it is used, so HOME decides where it is
HOME_CACHE = "~/.cache/loader-advisor"
DEFAULT_INDEX_DIR = f"{HOME_CACHE}/listings"  # where an exported loader saves its listings
INDEX_SUFFIX = ".index"
LOCK_WAIT_S = 1800.0  # how long a process waits for another one listing the same prefix
WAIT_SAID_AFTER_S = 1.0  # a listing this long before the first sample is worth a line
_LOCK_POLL_S = 0.2
log = logging.getLogger("native_loader")


@dataclass(frozen=True)
class ListingInfo:
    """Where a dataset's objects came from: ``origin`` "listed" (by this process), "saved
    index" (loaded from `path`) or "given" (a list of URIs); `objects` in it; `seconds` the
    listing (or the load) took; `age_s` how old the listing is (0 for one just made)."""

    origin: str
    objects: int
    seconds: float
    age_s: float = 0.0
    path: str | None = None


@dataclass(frozen=True)
class IndexSpec:
    """Where a dataset saves its listing (`directory`; None: it is not saved) and for how long
    a saved one is used (`max_age_s`, seconds); `refresh` lists again whatever its age."""

    directory: str | None = None
    max_age_s: float = DEFAULT_INDEX_MAX_AGE_S
    refresh: bool = False

    def __post_init__(self) -> None:
        if self.max_age_s < 0:
            raise ValueError(f"index max_age_s={self.max_age_s} must be >= 0")


def data_objects(source: str, reader: S3Reader, tar_only: bool = False) -> Iterator[ObjectInfo]:
    """The objects of a listed prefix a dataset reads, page by page: no metadata (`is_metadata`:
    ``_SUCCESS``, ``.DS_Store``, ...) and no folder markers (`ObjectInfo.is_folder_marker`), as
    the profile does; a key ending in ``/`` that has bytes is read like any other. With
    `tar_only`, only ``.tar`` objects: a shard folder also holds its index (``shards.json``).
    Each page is asked for while the last one is taken (`ListPages.ahead`)."""
    for info in reader.list(source, ahead=True):
        if info.is_folder_marker or is_metadata(info.uri, source):
            continue
        if not tar_only or info.uri.endswith(".tar"):
            yield info


def listing_head(source: str) -> str:
    """What every listed URI of `source` starts with: ``s3://bucket/``, or "" for local paths."""
    scheme, bucket, _ = parse_uri(source)
    return f"s3://{bucket}/" if scheme == "s3" else ""


def given(items: Iterable[Any]) -> list[str | ObjectInfo]:
    """A list of URIs or `ObjectInfo` as a dataset reads it (kept as given)."""
    return [item if isinstance(item, ObjectInfo) else str(item) for item in items]


def index_path(directory: str, config: ReaderConfig, source: str, tar_only: bool) -> str:
    key = f"{_endpoint(config)}\0{source}\0{'tar' if tar_only else 'all'}"
    digest = hashlib.sha256(key.encode()).hexdigest()
    return os.path.join(os.path.expanduser(directory), f"listing-{digest}{INDEX_SUFFIX}")


def _endpoint(config: ReaderConfig) -> str:
    """The endpoint the reader will use (the environment may name one); AWS's own is ""."""
    endpoint = config.endpoint_url or ""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        endpoint = endpoint or os.environ.get(name, "")
    return endpoint


def public_endpoint(endpoint: str) -> str:
    """`endpoint` without a user part (``http://user:secret@host`` is ``http://host``): what a
    file may say of it."""
    parts = urllib.parse.urlsplit(endpoint)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def saved_index(
    spec: IndexSpec, config: ReaderConfig, source: str, tar_only: bool, newer_than: float = 0.0
) -> tuple[ObjectIndex, ListingInfo] | None:
    """The saved index of `source`, when there is one younger than the spec's maximum age (and
    listed after `newer_than`, Unix time); None otherwise (also for a local path)."""
    if spec.directory is None or parse_uri(source)[0] != "s3":
        return None
    path = index_path(spec.directory, config, source, tar_only)
    started = time.monotonic()
    try:
        index = load(path)
    except (OSError, ValueError):
        return None  # none yet, or cut short by a crash: listed again
    listed_at = float(index.header.get("listed_at", 0.0))
    age = max(time.time() - listed_at, 0.0)
    if age > spec.max_age_s or listed_at < newer_than:
        return None
    info = ListingInfo("saved index", len(index), time.monotonic() - started, age, path)
    log.info(
        "%s: loaded its listing of %d objects (%.0f s old) from %s", source, len(index), age, path
    )
    return index, info


def save_index(
    index: ObjectIndex, spec: IndexSpec, config: ReaderConfig, source: str, tar_only: bool,
    listed_at: float, seconds: float,
) -> str | None:  # fmt: skip
    """Save `index` where `spec` says (None: nowhere); a full disk leaves it unsaved."""
    if spec.directory is None or parse_uri(source)[0] != "s3":
        return None
    path = index_path(spec.directory, config, source, tar_only)
    try:
        index.save(
            path, source=source, endpoint=public_endpoint(_endpoint(config)),
            listed_at=listed_at, list_seconds=seconds,
        )  # fmt: skip
    except OSError as exc:
        log.warning("%s: its listing could not be saved in %s (%s)", source, path, exc)
        return None
    return path


def listed_index(
    source: str, reader: S3Reader, tar_only: bool, spec: IndexSpec
) -> tuple[ObjectIndex, ListingInfo]:
    """The objects of `source` as an index: a saved one where the spec allows it, else listed
    here (and saved), the processes of a node taking turns so that one of them lists."""
    asked = time.time()  # a refresh takes an index listed after it was asked for
    newer_than = asked if spec.refresh else 0.0
    found = saved_index(spec, reader.config, source, tar_only, newer_than)
    if found is not None:
        return found
    if spec.directory is None or parse_uri(source)[0] != "s3":
        return list_index(source, reader, tar_only)
    path = index_path(spec.directory, reader.config, source, tar_only)
    with _locked(path + ".lock", source):
        found = saved_index(spec, reader.config, source, tar_only, newer_than)
        if found is not None:  # another process listed it while this one waited
            return found
        index, info = list_index(source, reader, tar_only)
        saved = save_index(index, spec, reader.config, source, tar_only, asked, info.seconds)
        return index, ListingInfo(info.origin, info.objects, info.seconds, 0.0, saved)


def list_index(source: str, reader: S3Reader, tar_only: bool) -> tuple[ObjectIndex, ListingInfo]:
    started = time.monotonic()
    index = IndexBuilder(listing_head(source)).extend(data_objects(source, reader, tar_only))
    return index.build(), ListingInfo("listed", len(index), time.monotonic() - started)


def said_wait(source: str, why: str, info: ListingInfo, spec: IndexSpec) -> None:
    """Tell the user, once, that a read waited for the whole listing, and how long it took,
    where that was long enough to notice (`WAIT_SAID_AFTER_S`)."""
    if info.origin != "listed" or info.seconds < WAIT_SAID_AFTER_S:
        return
    if info.path is not None:
        then = f"saved in {info.path} for later runs and ranks"
    else:
        then = "give the dataset an index_dir (or a cache_dir) to save it for later runs and ranks"
    log.warning(
        "%s: %s waits for the whole listing before its first sample: %s objects listed in "
        "%.1f s; %s", source, why, f"{info.objects:,}", info.seconds, then,
    )  # fmt: skip


@contextlib.contextmanager
def _locked(path: str, source: str) -> Iterator[None]:
    import fcntl

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another process has listed {source} for {LOCK_WAIT_S:g} s (it holds "
                        f"{path}): stop it, or give this dataset another index_dir"
                    ) from None
                time.sleep(_LOCK_POLL_S)
        yield
    finally:
        os.close(fd)

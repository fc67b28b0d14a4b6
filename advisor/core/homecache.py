"""The home cache, `~/.cache/loader-advisor`: what the advisor and its exported loaders keep on
local disk, listed with sizes and removable (`python -m advisor cache`).

It holds, per data set an export read (a folder named by a digest of its source): the
copy-local copy every epoch reads (`<digest>/copy`, with the record of its source and of its
last sync) and the cache later epochs of a streamed set read (the files beside it); the
listings exported loaders saved (`listings/listing-<digest>.index`, each its own entry,
`native_loader.listing`); the run history (`history/`, `advisor.decide.history.store`); and
the demo's generated data and server store (`demo/`, or where `LOADER_ADVISOR_DEMO_CACHE` puts
it). Nothing here is removed on its own: a copy is the point of copy-local, and a later run
reuses it (a listing past its age is listed again and saved over). A folder a process is
copying into (its lock held) is not removed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.core.units import data_rate, data_size, duration
from native_loader.index import load
from native_loader.listing import DEFAULT_INDEX_DIR, HOME_CACHE, INDEX_SUFFIX
from native_loader.local_copy import LOCK, SOURCE, last_copy

CACHE_ROOT = HOME_CACHE  # local disk; point it at NVMe scratch where there is one
LISTINGS = Path(DEFAULT_INDEX_DIR).name  # the exported loaders' saved listings: one entry each
DEMO = "demo"
HISTORY = "history"  # the run history's folder: its database and SQLite's files beside it
ENV_DEMO_CACHE = "LOADER_ADVISOR_DEMO_CACHE"

__all__ = [
    "CACHE_ROOT", "CacheEntry", "demo_root", "entries", "history_root", "remove", "size_of",
    "summary",
]  # fmt: skip


@dataclass(frozen=True)
class CacheEntry:
    """One thing the home cache holds: its `name` (what `remove` takes), folder, bytes on disk
    (the files' sizes), what it is in words, and the process copying into it (None: none)."""

    name: str
    path: Path
    bytes: int
    what: str
    busy: str | None = None

    def line(self) -> str:
        busy = f" (process {self.busy} is copying into it)" if self.busy else ""
        return f"{self.name:<14} {data_size(self.bytes):>10}  {self.what}{busy}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "bytes": self.bytes,
                "what": self.what, "busy": self.busy}  # fmt: skip


def root() -> Path:
    return Path(CACHE_ROOT).expanduser()


def history_root() -> Path:
    """The run history's folder: kept across processes, removed like any entry."""
    return root() / HISTORY


def demo_root() -> Path:
    """Where generated demo data is kept across kernels: $LOADER_ADVISOR_DEMO_CACHE, else
    $XDG_CACHE_HOME/loader-advisor/demo, else ~/.cache/loader-advisor/demo."""
    if os.environ.get(ENV_DEMO_CACHE):
        return Path(os.environ[ENV_DEMO_CACHE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "loader-advisor" / DEMO


def entries(home: Path | None = None, demo: Path | None = None) -> list[CacheEntry]:
    """What `home` (default `CACHE_ROOT`) holds, largest first; `demo`: the demo's cache
    folder (default `demo_root()`), listed as "demo" wherever it is."""
    home = home or root()
    demo = demo or demo_root()
    found: list[CacheEntry] = []
    if home.is_dir():
        for path in sorted(home.iterdir()):
            if path.resolve() == demo.resolve():
                continue
            if path.name == LISTINGS and path.is_dir() and not path.is_symlink():
                found += [_listing(index) for index in sorted(path.glob(f"*{INDEX_SUFFIX}"))]
                continue
            found.append(_entry(path))
    if demo.is_dir():
        found.append(
            CacheEntry(DEMO, demo, _bytes(demo), f"the demo's generated data and server store "
                       f"({demo}; made again when the demo next starts)")
        )  # fmt: skip
    return sorted(found, key=lambda e: -e.bytes)


def summary(home: Path | None = None, demo: Path | None = None) -> str:
    """One line: what the home cache holds, and how to list and free it."""
    home = home or root()
    held = entries(home, demo)
    total = sum(e.bytes for e in held)
    return (
        f"the home cache {_tilde(home)} holds {data_size(total)} in {len(held)} "
        f"folder{'s' if len(held) != 1 else ''} (`python -m advisor cache` lists them; "
        "`--remove NAME` frees one)"
    )


def remove(name: str, home: Path | None = None, demo: Path | None = None) -> CacheEntry:
    """Remove the entry `name` of the listing; the entry removed. Raises ValueError for a name
    the listing does not hold, or one a process is copying into."""
    held = {e.name: e for e in entries(home, demo)}
    entry = held.get(name)
    if entry is None:
        known = ", ".join(sorted(held)) or "nothing"
        raise ValueError(f"the home cache holds no {name!r} (it holds: {known})")
    if entry.busy:
        raise ValueError(
            f"process {entry.busy} is copying into {entry.path}: stop it or let it finish, "
            "then remove it"
        )
    if entry.path.is_dir() and not entry.path.is_symlink():
        shutil.rmtree(entry.path)
    else:  # a file, or a link: the link goes, never what it points at
        entry.path.unlink()
    return entry


def _entry(path: Path) -> CacheEntry:
    if path.name == HISTORY and path.is_dir():
        return CacheEntry(HISTORY, path, _bytes(path), "the run history: trials, "
                          "recommendations, comparisons and watched epochs (`python -m advisor "
                          "history` lists them)")  # fmt: skip
    if not path.is_dir():
        return CacheEntry(path.name, path, _bytes(path), "a file the advisor did not describe")
    copy = path / "copy"
    parts = []
    busy = None
    if (copy / SOURCE).exists():
        parts.append(_copy_words(copy))
        busy = _copier(copy)
    elif copy.is_dir():
        parts.append("a copy-local copy made by an earlier version (its source not recorded)")
        busy = _copier(copy)
    streamed = _bytes(path) - _bytes(copy)
    if streamed > 0:
        parts.append(f"{data_size(streamed)} cached by a streaming loader for its later epochs")
    what = "; ".join(parts) or "an empty folder"
    return CacheEntry(path.name, path, _bytes(path), what, busy)


def _listing(path: Path) -> CacheEntry:
    """A saved listing: what it lists, how many objects, how old (its header says)."""
    name = path.name[:14]  # "listing-" and 6 hex digits of its key
    try:
        header = load(path).header
        where = f"{header['source']} on {header.get('endpoint') or 'AWS S3'}"
        age = duration(max(time.time() - float(header["listed_at"]), 0.0))
        what = (
            f"the saved listing of {where}: {int(header['count']):,} objects, listed {age} ago "
            "(exported loaders load it instead of listing again until it is older than their "
            "index_max_age_s)"
        )
    except (OSError, ValueError, KeyError, TypeError):
        what = "a saved listing that cannot be read (listed again when next needed)"
    return CacheEntry(name, path, _bytes(path), what)


def _copy_words(copy: Path) -> str:
    """ "the local copy of s3://b/p on http://...: made in 7.0 s at 33 MiB/s" """
    try:
        source = json.loads((copy / SOURCE).read_text())
        where = f"s3://{source['bucket']}/{source['prefix']} on {source['endpoint'] or 'AWS S3'}"
    except (OSError, ValueError, KeyError, TypeError):
        where = "an S3 prefix"
    words = f"the copy-local copy of {where}"
    report = last_copy(copy)
    if report is not None and report.copied_bytes:
        words += (
            f" (its last sync fetched {data_size(report.copied_bytes)} in "
            f"{duration(report.seconds)}, {data_rate(report.bytes_per_s)})"
        )
    return words


def _copier(copy: Path) -> str | None:
    """The pid of a process holding the copy's lock (copying into it); None: none."""
    import fcntl

    try:
        fd = os.open(copy / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    finally:
        os.close(fd)  # releases a lock taken here
    return None


def size_of(path: Path) -> int:
    """The sizes of the files under `path` (0: nothing there)."""
    return _bytes(path)


def _bytes(path: Path) -> int:
    """The sizes of the files under `path` (links not followed)."""
    if not path.exists():
        return 0
    if not path.is_dir():
        return path.lstat().st_size
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _tilde(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


# --- python -m advisor cache -----------------------------------------------------------------


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "cache",
        parents=[common],
        help="list the home cache (local copies, caches, saved listings, the demo's data) and "
        "remove from it",
        description=f"List what {CACHE_ROOT} holds, with sizes: the copy-local copies exported "
        "loaders read, the listings they saved, the caches of streamed epochs and the demo's "
        "data. --remove frees one.",
    )
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--remove and --remove-all: the CLI's `cache` and the `%advisor cache` magic's."""
    what = p.add_mutually_exclusive_group()
    what.add_argument("--remove", metavar="NAME", action="append", help="remove NAME (repeat)")
    what.add_argument("--remove-all", action="store_true", help="remove everything listed")


def run(args: argparse.Namespace, demo: Path | None = None) -> int:
    """List the home cache, or remove from it; the exit status (2: a name it does not hold)."""
    names = args.remove or []
    if args.remove_all:  # all but what a process is copying into, said so
        for entry in entries(demo=demo):
            if entry.busy:
                busy = f"process {entry.busy} is copying into it"
                print(f"kept {entry.name}: {busy}", file=sys.stderr)
            else:
                names.append(entry.name)
    removed = []
    for name in names:
        try:
            removed.append(remove(name, demo=demo))
        except (ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    held = entries(demo=demo)
    if args.json:
        print(json.dumps({"root": str(root()), "removed": [e.to_dict() for e in removed],
                          "entries": [e.to_dict() for e in held]}, indent=2))  # fmt: skip
        return 0
    for entry in removed:
        print(f"removed {entry.name} ({data_size(entry.bytes)}): {entry.path}")
    print(f"{root()}: {data_size(sum(e.bytes for e in held))}")
    print("\n".join(e.line() for e in held) if held else "(empty)")
    return 0

"""Where each object lands in a local copy (`native_loader.local_copy`): the file of its key
below the listed prefix, a key ending in ``/`` with bytes as ``<name>%2F``, and the keys one
folder cannot hold apart refused before anything is copied."""

from __future__ import annotations

import os

from native_loader.results import ObjectInfo


def copy_path(root: str, prefix: str, key: str) -> str:
    """The file of `key` in the copy: the key below the prefix, as a path below `root`.

    A key ending in ``/`` that has bytes (an object, not a folder marker) cannot be a file by
    that name: each trailing ``/`` becomes ``%2F``, so ``d/`` is the file ``d%2F`` beside the
    folder ``d`` that holds ``d/x``. A key that would land outside `root` is refused; keys that
    would share a file are refused by `copy_paths`."""
    relative = key[len(prefix) :] if prefix else key
    name = relative.rstrip("/")
    slashes = len(key) - len(key.rstrip("/"))
    if slashes:
        relative = name.lstrip("/") + "%2F" * slashes
    else:
        relative = relative.lstrip("/") or os.path.basename(key)
    path = os.path.normpath(os.path.join(root, relative))
    if os.path.commonpath([path, os.path.normpath(root)]) != os.path.normpath(root):
        raise ValueError(f"the object key {key!r} would be copied outside {root}: refused")
    return path


def copy_paths(root: str, prefix: str, listed: list[ObjectInfo]) -> dict[str, str]:
    """`copy_path` of each listed key. Keys that one folder cannot hold apart (``a`` beside
    ``a/b``: a file and a folder of one name; ``a//b`` beside ``a/b``; ``d/`` beside a key
    ``d%2F``) are refused before anything is copied: one would overwrite the other."""
    targets: dict[str, str] = {}
    owner: dict[str, str] = {}
    for info in listed:
        path = targets[info.key] = copy_path(root, prefix, info.key)
        other = owner.setdefault(path, info.key)
        if other != info.key:
            _clash(root, other, info.key)
    base = os.path.normpath(root)
    for key, path in targets.items():
        folder = os.path.dirname(path)
        while len(folder) > len(base) and folder not in owner:  # up to the root, at most
            folder = os.path.dirname(folder)
        if folder in owner:
            _clash(root, owner[folder], key)
    return targets


def _clash(root: str, first: str, second: str) -> None:
    first, second = sorted((first, second))
    raise ValueError(
        f"the object keys {first!r} and {second!r} cannot both be files in the local copy in "
        f"{root} (one would be the other's file or folder): read the data in place, or rename "
        "one of them"
    )


def data_files(root: str) -> set[str]:
    """Every file in the copy's folder that a listing of it reads as data (not metadata)."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d[:1] not in ("_", ".")]
        found.update(os.path.join(folder, f) for f in files if f[:1] not in ("_", "."))
    return found

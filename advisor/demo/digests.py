"""Sizes and SHA-256 digests of the files the demo keeps across kernels, so that kept data is
checked before it is served: a file changed on disk (a zeroed JPEG, a truncated volume) is
noticed, and the data generated or uploaded again, instead of being served as it is.

A listing is ``relative path -> [size, sha256 hex]``, JSON as it is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

Digests = dict[str, list[int | str]]
_CHUNK = 2**20


def file_digest(path: Path) -> list[int | str]:
    """[size, sha256 hex] of the file at `path`."""
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return [size, sha.hexdigest()]


def folder_digests(root: Path, skip: Callable[[Path], bool] = lambda _: False) -> Digests:
    """The digest of every file under `root` (by path relative to it), but those `skip` names."""
    return {
        path.relative_to(root).as_posix(): file_digest(path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and not skip(path)
    }


def copy_checked(
    source: Path, target: Path, expected: Digests, ignore: Callable[[str, list[str]], Iterable[str]]
) -> bool:
    """Copy the folder `source` into `target` (`shutil.copytree`'s `ignore`), hashing each file
    as it is copied (one read); True when the copy holds exactly the files of `expected`."""
    got: Digests = {}

    def copy(src: str, dst: str) -> None:
        sha, size = hashlib.sha256(), 0
        with open(src, "rb") as f, open(dst, "wb") as out:
            while chunk := f.read(_CHUNK):
                sha.update(chunk)
                out.write(chunk)
                size += len(chunk)
        shutil.copystat(src, dst)
        got[Path(os.path.relpath(src, source)).as_posix()] = [size, sha.hexdigest()]

    shutil.copytree(source, target, dirs_exist_ok=True, ignore=ignore, copy_function=copy)
    return got == expected

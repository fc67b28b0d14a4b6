"""The synthetic bucket's contents: `Keyspace` computes every key, its object's body and its
ETag from an index, so a bucket of millions of keys needs no storage."""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass

SEPARATOR = b"\x00\xff"  # ends the key in a body; 0xff is never UTF-8: the body is not text


@dataclass(frozen=True)
class Keyspace:
    """The bucket's contents. bucket: its name. prefix: what every key starts with. count: the
    number of keys (>= 0). size: bytes (B) of every object (>= 0). suffix: what every key ends
    with."""

    bucket: str = "synth"
    prefix: str = "train/"
    count: int = 1_000_000
    size: int = 1024
    suffix: str = ".bin"

    def __post_init__(self) -> None:
        if self.count < 0 or self.size < 0:
            raise ValueError(f"{self.count=} and {self.size=} must be >= 0")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", self.bucket):
            raise ValueError(f"{self.bucket=} is not a bucket name")
        if any(c.isdigit() for c in self.suffix[:1]):
            raise ValueError(f"{self.suffix=} may not start with a digit (key order = index order)")

    @functools.cached_property
    def width(self) -> int:  # computed once: every key of every page is formatted with it
        return max(8, len(str(max(self.count - 1, 0))))

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, index: int) -> str:
        return f"{self.prefix}{index:0{self.width}d}{self.suffix}"

    def index(self, key: str) -> int | None:
        """The index of `key`, None where it is not one of the bucket's keys."""
        digits = key[len(self.prefix) : len(key) - len(self.suffix)]
        if (
            not key.startswith(self.prefix)
            or not key.endswith(self.suffix)
            or len(digits) != self.width
            or not digits.isdigit()
        ):
            return None
        index = int(digits)
        return index if index < self.count else None

    def body(self, key: str) -> bytes:
        """The key, then bytes that no text holds (so that it profiles as binary), repeated."""
        seed = key.encode() + SEPARATOR
        return (seed * (self.size // len(seed) + 1))[: self.size]

    def md5(self, key: str) -> str:
        """The MD5 of the key: hashing each body would cost a page of 1,000 keys ~5 ms of the
        server's CPU, a third of the native reader's time for it (S3's ETag is the body's MD5
        only for single-part uploads; no client checks it against the body)."""
        return hashlib.md5(key.encode()).hexdigest()

    def etag(self, key: str) -> str:
        """The ETag header's value: `md5` in double quotes."""
        return f'"{self.md5(key)}"'

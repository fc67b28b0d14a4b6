"""What reads and listings return: `ObjectInfo` (a listed object) and `ReadResult` (the bytes
of one read, with the buffer protocol)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from native_loader import _native


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: its URI (readable as is), key, size in bytes and ETag.

    With a delimiter, common prefixes are listed too: key ends with the delimiter, size 0,
    etag "".
    """

    uri: str
    key: str
    size: int
    etag: str

    @property
    def is_folder_marker(self) -> bool:
        """A key ending in ``/`` with no bytes: what consoles and tools write to show a folder
        (and a common prefix from a delimited listing). Not data: the datasets, the profile and
        the local copy skip it. A key ending in ``/`` that has bytes is an object like any
        other."""
        return self.key.endswith("/") and self.size == 0


class ReadResult(_native.Buffer):
    """The bytes of one read, exposed with the buffer protocol (no copy): ``memoryview(r)``,
    ``bytes(r)``, ``numpy.frombuffer(r, ...)``, ``torch.frombuffer(r, ...)``, ``len(r)``.

    Attributes: ``uri``; ``first_byte_s`` and ``elapsed_s`` (seconds from submission to the
    first response byte and to completion); ``attempts`` (most attempts any part needed).
    """

    uri: str
    first_byte_s: float
    elapsed_s: float
    attempts: int

    def __init__(
        self, data: _native.Buffer, uri: str, first_byte_s: float, elapsed_s: float, attempts: int
    ) -> None:
        super().__init__(data)
        self.uri = uri
        self.first_byte_s = first_byte_s
        self.elapsed_s = elapsed_s
        self.attempts = attempts

    if TYPE_CHECKING:  # the native base implements the buffer protocol in C

        def __buffer__(self, flags: int, /) -> memoryview: ...

    def __repr__(self) -> str:
        return f"ReadResult(uri={self.uri!r}, size={len(self)}, elapsed_s={self.elapsed_s:.3f})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_result,
            (bytes(memoryview(self)), self.uri, self.first_byte_s, self.elapsed_s, self.attempts),
        )


def _rebuild_result(
    data: bytes, uri: str, first_byte_s: float, elapsed_s: float, attempts: int
) -> ReadResult:
    # Bytes from a pickle (e.g. a DataLoader worker) are copied once into native storage.
    return ReadResult(_native.buffer_from(data), uri, first_byte_s, elapsed_s, attempts)

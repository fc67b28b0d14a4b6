"""The tar reader (`native_loader.tar`) against Python's tarfile as the oracle: both the buffer
(`iter_members`) and the stream (`iter_members_stream`) read what tarfile reads, and a shard cut
short anywhere is an error, never a shorter shard."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from native_loader.tar import BLOCK, iter_members, iter_members_stream


class _Trickle(io.RawIOBase):
    """A stream that hands over at most 100 bytes per read, as a network stream may."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data, self._position = data, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        size = 100 if size is None or size < 0 else min(size, 100)
        piece = self._data[self._position : self._position + size]
        self._position += len(piece)
        return piece


def _oracle(data: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return [(m.name, archive.extractfile(m).read()) for m in archive if m.isreg()]  # type: ignore[union-attr]


def _both(data: bytes) -> list[tuple[str, bytes]]:
    whole = [(name, bytes(body)) for name, body in iter_members(data)]
    assert list(iter_members_stream(io.BytesIO(data))) == whole
    assert list(iter_members_stream(_Trickle(data))) == whole
    return whole


def _header(info: tarfile.TarInfo) -> bytearray:
    return bytearray(info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape"))


def _checksummed(header: bytearray) -> bytes:
    header[148:156] = b" " * 8
    header[148:155] = b"%06o\0" % sum(header)
    return bytes(header)


def _member(header: bytes, body: bytes) -> bytes:
    return header + body + bytes(-len(body) % BLOCK)


def _pax(kind: bytes, records: dict[str, str]) -> bytes:
    """A pax header (``x`` or ``g``) and its records, each ``<length> <key>=<value>\\n``."""
    data = b""
    for key, value in records.items():
        payload = f" {key}={value}\n".encode()
        length = len(payload) + len(str(len(payload)))
        length = len(payload) + len(str(length))
        data += str(length).encode() + payload
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = kind, len(data)
    return _member(bytes(_header(info)), data)


def _regular(name: str, body: bytes, header_size: int | None = None) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(body) if header_size is None else header_size
    return _member(_checksummed(_header(info)), body)


def _shard(samples: int = 10, fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for i in range(samples):
            folder = "f" * 120 if i % 3 == 0 else "d"  # a long name: an x header before it
            for ext, data in (("bin", os.urandom(300 + 97 * i)), ("cls", b"%d" % i)):
                info = tarfile.TarInfo(f"{folder}/s{i:02d}.{ext}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _end(data: bytes) -> int:
    """Where the archive's two zero end blocks end (tarfile pads the record after them)."""
    offset = 0
    while data[offset : offset + BLOCK] != bytes(BLOCK):
        size = int(data[offset + 124 : offset + 136].split(b"\0")[0] or b"0", 8)
        offset += BLOCK + -(-size // BLOCK) * BLOCK
    return offset + 2 * BLOCK


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu"])
def test_a_shard_cut_short_anywhere_is_an_error(fmt: int) -> None:
    data = _shard(fmt=fmt)
    end = _end(data)
    assert _both(data) == _oracle(data) and len(_oracle(data)) == 20
    # in a header, a body, a padding, between or in the end blocks: every block's edges
    cuts = {c for b in range(0, end, BLOCK) for c in (b, b + 1, b + 156, b + 300, b + BLOCK - 1)}
    for cut in sorted(cuts):
        short = data[:cut]
        with pytest.raises(ValueError, match="truncated tar archive"):
            list(iter_members(short))
        with pytest.raises(ValueError, match="truncated tar archive"):
            list(iter_members_stream(io.BytesIO(short)))
    for cut in (end, end + 1, len(data) - 1):  # the record's padding after the end blocks
        assert _both(data[:cut]) == _oracle(data)


def test_a_header_with_a_bad_checksum_is_an_error() -> None:
    data = bytearray(_shard(3))
    data[data.index(b"d/s01.bin") + 2] ^= 0x01  # a name byte of a later header
    with pytest.raises(ValueError, match="bad checksum"):
        list(iter_members(bytes(data)))


def test_a_size_in_gnu_base_256_reads_as_tarfile_reads_it() -> None:
    body = os.urandom(5120)
    header = _header(tarfile.TarInfo("big.bin"))
    header[124:136] = b"\x80" + (5120).to_bytes(11, "big")  # GNU tar's form for >= 8 GiB
    data = _member(_checksummed(header), body) + _regular("next.bin", b"after") + bytes(1024)
    expected = [("big.bin", body), ("next.bin", b"after")]
    assert _oracle(data) == expected
    assert _both(data) == expected


def test_pax_extended_headers_set_path_and_size() -> None:
    body = os.urandom(5120)
    odd = "dir/we=ird\nname " + "é" * 80 + ".bin"  # a newline and "=" in a value, > 100 bytes
    data = (
        _pax(b"x", {"path": odd, "size": "5120", "mtime": "1.5"})
        + _regular("short-name", body, header_size=0)  # the size only in the pax record
        + _pax(b"x", {"path": "plain/"})
        + _regular("ignored", b"p")
        + _regular("after.bin", b"after")
        + bytes(1024)
    )
    expected = [(odd, body), ("plain", b"p"), ("after.bin", b"after")]
    assert _oracle(data) == expected
    assert _both(data) == expected


def test_a_pax_global_header_applies_to_every_later_member() -> None:
    data = (
        _regular("first.bin", b"1")
        + _pax(b"g", {"comment": "made by hand", "path": "global/name.bin"})
        + _regular("second.bin", b"22")
        + _pax(b"x", {"path": "own/name.bin"})
        + _regular("third.bin", b"333")
        + bytes(1024)
    )
    expected = _oracle(data)
    assert [name for name, _ in expected] == ["first.bin", "global/name.bin", "own/name.bin"]
    assert _both(data) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_pax(b"g", {"size": "3"}) + _regular("a.bin", b"abc") + bytes(1024), "global pax"),
        (_pax(b"x", {"size": "x1"}) + _regular("a.bin", b"abc") + bytes(1024), "size='x1'"),
        (_regular("a.bin", b"abc") + bytes(BLOCK) + _regular("b.bin", b"b"), "lone zero block"),
    ],
    ids=["global size", "size not a number", "lone zero block"],
)
def test_headers_this_reader_cannot_frame_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        list(iter_members(data))
    with pytest.raises(ValueError, match=message):
        list(iter_members_stream(io.BytesIO(data)))

"""Format detection by magic bytes and samples-per-container estimates."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest
from PIL import Image

from advisor.demo.datasets import pack_tar
from advisor.measure.formats import _crc32c, _masked_crc32c, by_extension, by_magic, samples_in_head


def _image(fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buffer, fmt)
    return buffer.getvalue()


def _npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.arange(4))
    return buffer.getvalue()


def _tfrecord(records: list[bytes]) -> bytes:
    out = b""
    for data in records:
        length = struct.pack("<Q", len(data))
        out += length + struct.pack("<I", _masked_crc32c(length))
        out += data + struct.pack("<I", _masked_crc32c(data))
    return out


def test_crc32c_known_answer() -> None:
    assert _crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (_image("JPEG"), "jpeg"),
        (_image("PNG"), "png"),
        (pack_tar([("a.jpg", b"x" * 10)]), "tar"),
        (b"PAR1" + b"\x00" * 20, "parquet"),
        (_npy(), "npy"),
        (_tfrecord([b"abc", b"defg"]), "tfrecord"),
        (struct.pack("<I", 0xCED7230A) + b"\x00" * 12, "recordio"),
        (b'{"a": 1}\n{"a": 2}\n', "jsonl"),
        (b"hello world\nsecond line\n", "text"),
        ("übung\n".encode(), "text"),
        (bytes(range(256)), None),
    ],
)
def test_by_magic(data: bytes, expected: str | None) -> None:
    assert by_magic(data) == expected


def test_by_extension() -> None:
    assert by_extension("a/b/c.JPG") == "jpeg"
    assert by_extension("x.tar") == "tar"
    assert by_extension("noext") is None


def test_tar_samples_counts_stems_and_extrapolates() -> None:
    members = []
    for i in range(50):
        members += [(f"{i:04d}.jpg", b"j" * 1000), (f"{i:04d}.cls", b"3")]
    whole = pack_tar(members)
    assert samples_in_head("tar", whole, len(whole)) == 50
    head = whole[: len(whole) // 2]
    estimate = samples_in_head("tar", head, len(whole))
    assert estimate is not None and 40 <= estimate <= 60


def test_lines_and_tfrecord_counts() -> None:
    text = b"".join(json.dumps({"i": i}).encode() + b"\n" for i in range(100))
    assert samples_in_head("jsonl", text, len(text)) == 100
    record = _tfrecord([b"z" * 100] * 20)
    assert samples_in_head("tfrecord", record, len(record)) == pytest.approx(20)
    assert samples_in_head("npy", _npy(), 100) is None


def test_record_format() -> None:
    from advisor.measure.formats import record_format

    assert record_format("jsonl", "a/b.jsonl", 100.0) == "jsonl"
    assert record_format("text", "a/b.txt", 100.0) == "lines"
    assert record_format("text", "a/B.CSV", 100.0) == "csv"
    assert record_format("text", "a/b.cls", 1.0) is None  # one label per object
    assert record_format("text", "a/b.txt", None) is None
    assert record_format("tar", "a/b.tar", 100.0) is None

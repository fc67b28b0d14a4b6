"""Data formats by extension and by magic bytes, and samples per container where we can tell."""

from __future__ import annotations

import json
import struct
import tarfile
from pathlib import PurePosixPath

# Extension -> format name. Compound extensions (".tar.gz") are checked first.
EXTENSIONS: dict[str, str] = {
    ".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png", ".tar": "tar", ".tfrecord": "tfrecord",
    ".tfrecords": "tfrecord", ".parquet": "parquet", ".npy": "npy", ".npz": "npz", ".mds": "mds",
    ".rec": "recordio", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".txt": "text",
    ".csv": "text", ".cls": "text", ".gz": "gzip", ".zip": "zip", ".pt": "torch", ".pth": "torch",
}  # fmt: skip
CONTAINERS = frozenset({"tar", "tfrecord", "parquet", "mds", "recordio", "jsonl", "text", "npz"})
RECORDIO_MAGIC = 0xCED7230A
HEAD_BYTES = 1 << 20  # how much of a sampled object we read to sniff and count samples


def by_extension(key: str) -> str | None:
    suffix = PurePosixPath(key).suffix.lower()
    return EXTENSIONS.get(suffix)


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked_crc32c(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def by_magic(head: bytes) -> str | None:
    """The format the first bytes of an object announce, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if len(head) >= 4 and struct.unpack("<I", head[:4])[0] == RECORDIO_MAGIC:
        return "recordio"
    if len(head) >= 12:
        (length,) = struct.unpack("<Q", head[:8])
        (crc,) = struct.unpack("<I", head[8:12])
        if 0 < length < 1 << 40 and crc == _masked_crc32c(head[:8]):
            return "tfrecord"
    if b"\x00" in head[:4096]:
        return None
    try:
        text = head[:4096].decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character cut at the end of the window is still text.
        try:
            text = head[:4092].decode("utf-8")
        except UnicodeDecodeError:
            return None
    first_line = text.split("\n", 1)[0].strip()
    if first_line.startswith("{"):
        try:
            json.loads(first_line)
            return "jsonl"
        except ValueError:
            pass
    return "text"


def record_format(fmt: str, key: str, samples_per_object: float | None) -> str | None:
    """How `native_loader.S3IterableDataset(records=...)` reads objects of this format as
    records, streamed: ``"jsonl"`` (parsed JSON lines), ``"csv"`` (rows of a ``.csv`` object) or
    ``"lines"`` (other text); None for other formats and for text objects that hold one record
    each (a label file next to an image is a sample's field, not a shard of records)."""
    if fmt not in ("jsonl", "text") or not samples_per_object or samples_per_object < 2:
        return None
    if fmt == "jsonl":
        return "jsonl"
    return "csv" if key.lower().endswith(".csv") else "lines"


def samples_in_head(fmt: str, head: bytes, object_size: int) -> float | None:
    """Samples in a whole container, extrapolated from its first bytes; None when unknown."""
    if not head or object_size <= 0:
        return None
    scale = object_size / len(head)
    if fmt == "tar":
        return _tar_samples(head, object_size)
    if fmt in ("jsonl", "text"):
        lines = head.count(b"\n")
        return max(1.0, lines * scale) if lines else 1.0
    if fmt == "tfrecord":
        return _tfrecord_records(head, scale)
    return None


def _tar_samples(head: bytes, object_size: int) -> float | None:
    """WebDataset samples = distinct member stems; counted over the complete members in `head`."""
    import io

    stems: set[str] = set()
    end = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(head), mode="r|") as tar:
            for member in tar:
                stems.add(member.name.split("/")[-1].split(".", 1)[0])
                end = member.offset_data + member.size
    except (tarfile.TarError, EOFError, OSError):
        pass  # the head ends mid-member: count what was complete
    if not stems:
        return None
    if len(head) >= object_size:
        return float(len(stems))
    return len(stems) * object_size / max(end, 1)


def _tfrecord_records(head: bytes, scale: float) -> float | None:
    offset = records = 0
    while offset + 12 <= len(head):
        (length,) = struct.unpack("<Q", head[offset : offset + 8])
        step = 12 + length + 4
        if offset + step > len(head):
            break
        offset += step
        records += 1
    if not records:
        return None
    return records * len(head) / offset * scale if offset else None

"""Text objects read as records: lines, JSON Lines or CSV rows, parsed as their parts arrive.

`iter_records(chunks, format)` turns the byte chunks of one object (`ObjectStream.chunks`, or a
whole buffer as one chunk) into records: ``"lines"`` gives each line as ``str`` (no line end),
``"jsonl"`` each non-blank line parsed with `json.loads`, ``"csv"`` each row after the header as
a ``dict`` (header -> field), as `csv.DictReader` reads the whole object (RFC 4180: a quoted
field keeps the line ends it holds). Text is UTF-8; ``\\r\\n`` ends a line too.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

RecordFormat = Literal["lines", "jsonl", "csv"]
RECORD_FORMATS: tuple[RecordFormat, ...] = ("lines", "jsonl", "csv")
SLICE_BYTES = 256 * 2**10
CSV_BLOCK_ROWS = 1024  # rows per list of `record_blocks` (a CSV row may span lines)


def iter_lines(chunks: Iterable[Any]) -> Iterator[bytes]:
    """Lines of the concatenated chunks, without their line ends; a last line without one too."""
    rest = b""
    for chunk in chunks:
        data = rest + bytes(chunk) if rest else bytes(chunk)
        lines = data.split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if rest:
        yield rest[:-1] if rest.endswith(b"\r") else rest


def _slices(chunks: Iterable[Any]) -> Iterator[bytes]:
    """The concatenated chunks about `SLICE_BYTES` at a time, each cut just after its last line
    end (a character or line cut by a boundary is carried to the next); the last may have none."""
    rest = b""
    for chunk in chunks:
        view = memoryview(chunk).cast("B")
        for start in range(0, len(view), SLICE_BYTES):
            data = view[start : start + SLICE_BYTES].tobytes()
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest += data
                continue
            yield rest + data[:cut] if rest else data[:cut]
            rest = data[cut:]
    if rest:
        yield rest


def text_blocks(chunks: Iterable[Any]) -> Iterator[list[str]]:
    """The lines of the concatenated chunks as ``str``, a list per slice of `SLICE_BYTES`: each
    slice is decoded and split in one call each, so the cost per line is not a Python call, and
    a slice stays in the CPU's cache while it is worked on."""
    for block in _slices(chunks):
        yield _split(block)


def csv_lines(chunks: Iterable[Any]) -> Iterator[str]:
    """The lines of the concatenated chunks with their line ends, as a file opened with
    ``newline=""`` gives them: `csv.reader` keeps a quoted field's line ends only when it is
    handed them, and a record may span lines, slices and parts (the reader carries it over)."""
    for block in _slices(chunks):
        yield from io.StringIO(block.decode("utf-8"), newline="")


def _split(block: bytes) -> list[str]:
    lines = block.decode("utf-8").split("\n")
    if block.endswith(b"\n"):
        lines.pop()  # the empty text after the slice's last line end
    if b"\r" in block:  # memchr; CRLF text only then pays for a pass per line
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


BadRecord = Callable[[Exception], None]


def _raise(exc: Exception) -> None:
    raise exc


def record_blocks(
    chunks: Iterable[Any], format: RecordFormat, on_bad: BadRecord = _raise
) -> Iterator[list[Any]]:
    """The records of one text object (see the module's doc) in lists, about a slice of text
    at a time, so that a consumer that takes them all pays no Python call per record.

    A JSON line that fails to decode (UTF-8) or parse goes to ``on_bad`` (after a list of the
    records before it) and the lines after it are read on: each line is a record of its own.
    By default ``on_bad`` raises, ending the iteration. A CSV row that fails ends the iteration
    with its error, after a list of those before it: a record may span lines, so the rows after
    a broken one are not known to start where a line does."""
    if format not in RECORD_FORMATS:
        raise ValueError(f"{format=} must be one of {RECORD_FORMATS}")
    if format == "lines":
        return text_blocks(chunks)
    if format == "jsonl":
        return _jsonl_blocks(chunks, on_bad)
    rows = csv.DictReader(csv_lines(chunks))
    return _kept((itertools.islice(rows, CSV_BLOCK_ROWS) for _ in itertools.count()), True)


def _jsonl_blocks(chunks: Iterable[Any], on_bad: BadRecord) -> Iterator[list[Any]]:
    for block in _slices(chunks):
        try:
            parsed: list[Any] | None = list(map(json.loads, filter(str.strip, _split(block))))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
            parsed = None  # a broken line: this slice again line by line (rare, slower)
        if parsed is not None:
            yield parsed
            continue
        done: list[Any] = []
        for raw in block.split(b"\n"):
            try:
                line = raw.decode("utf-8")  # a line that is not UTF-8 is one broken record
                if line.strip():
                    done.append(json.loads(line))
            except (ValueError, RecursionError) as exc:
                if done:
                    yield done  # the records before the one that failed
                    done = []
                on_bad(exc)
        if done:
            yield done


def _kept(groups: Iterable[Iterable[Any]], end_when_empty: bool = False) -> Iterator[list[Any]]:
    for group in groups:
        done: list[Any] = []
        try:
            done.extend(group)
        except Exception:
            if done:
                yield done  # the records before the one that failed
            raise
        if not done and end_when_empty:
            return
        yield done


def iter_records(chunks: Iterable[Any], format: RecordFormat) -> Iterator[Any]:
    """The records of one text object (see the module's doc), one at a time."""
    return itertools.chain.from_iterable(record_blocks(chunks, format))

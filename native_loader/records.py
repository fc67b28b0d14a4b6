"""Text objects read as records: lines, JSON Lines or CSV rows, parsed as their parts arrive.

`iter_records(chunks, format)` turns the byte chunks of one object (`ObjectStream.chunks`, or a
whole buffer as one chunk) into records: ``"lines"`` gives each line as ``str`` (no line end),
``"jsonl"`` each non-blank line parsed with `json.loads`, ``"csv"`` each row after the header as
a ``dict`` (header -> field). Text is UTF-8; ``\\r\\n`` ends a line too.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

RecordFormat = Literal["lines", "jsonl", "csv"]
RECORD_FORMATS: tuple[RecordFormat, ...] = ("lines", "jsonl", "csv")


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


def iter_records(chunks: Iterable[Any], format: RecordFormat) -> Iterator[Any]:
    """The records of one text object (see the module's doc)."""
    if format not in RECORD_FORMATS:
        raise ValueError(f"{format=} must be one of {RECORD_FORMATS}")
    lines = iter_lines(chunks)
    if format == "lines":
        return (line.decode("utf-8") for line in lines)
    if format == "jsonl":
        return (json.loads(line) for line in lines if line.strip())
    return csv.DictReader(line.decode("utf-8") for line in lines)

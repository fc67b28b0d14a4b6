"""A decision's evidence for people: each number a labelled value with its unit.

The rules name their evidence with the unit in the key (`p50_object_bytes`, `first_byte_s`,
`per_connection_mb_s`, `cpu_s_per_sample`); `evidence_rows` reads the unit from the key and
writes the value with `advisor.core.units`, and the rest of the key becomes its label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from advisor.core.units import GB, counted, data_rate, data_size, duration, mb_per_s, per_s, share
from advisor.decide.words import ceiling_words, storage_words

# (key suffix, how the value reads): the first that ends the key wins; the rest is the label
_UNITS: tuple[tuple[str, Callable[[float], str]], ...] = (
    ("_per_s_per_process", lambda v: f"{per_s(v)}/s per process"),
    ("_per_s_per_worker", lambda v: f"{per_s(v)}/s per worker"),
    ("_s_per_sample", lambda v: f"{duration(v)} per sample"),
    ("_s_per_epoch", lambda v: f"{duration(v)} per epoch"),
    ("_samples_per_s", lambda v: f"{per_s(v)} samples/s"),
    ("_usd_month", lambda v: f"${v:,.2f} per month"),
    ("_bytes", data_size),
    ("_mb_s", mb_per_s),
    ("_gb_s", lambda v: data_rate(v * GB)),
    ("_per_s", lambda v: f"{per_s(v)}/s"),
    ("_usd", lambda v: f"${v:,.4f}" if v < 1 else f"${v:,.2f}"),
    ("_s", duration),
    ("_error", share),
    ("_share", share),
)
_WORDS = {"p50": "median", "p95": "95th percentile", "cpu": "CPU", "s3": "S3", "rss": "RSS",
          "ram": "RAM", "gpu": "GPU", "gpus": "GPUs", "fsx": "FSx", "shm": "/dev/shm",
          "mb": "MB", "nvme": "NVMe", "hdd": "HDD", "get": "GET", "inflight": "in flight",
          "usd": "price"}  # fmt: skip
# Evidence whose value is a name the model uses: shown in the rationales' words
_NAMES: dict[str, Callable[[str], str]] = {"bottleneck": ceiling_words, "storage": storage_words}
HIDDEN = frozenset({"sweep_table"})  # shown as its own table


def _label(key: str) -> str:
    words = [_WORDS.get(word, word) for word in key.split("_") if word]
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else key


def _plain(value: object) -> str:
    if value is None:
        return "not known"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{_label(str(k)).lower()} {_plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def evidence_value(key: str, value: object) -> tuple[str, str]:
    """(label, value with its unit) for one piece of evidence."""
    for suffix, show in _UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            whole = suffix in ("_error", "_share")  # the unit is no word of the label there
            label = _label(key if whole else key[: -len(suffix)])
            return label, _with_unit(value, show)
    if key in _NAMES and isinstance(value, str):
        return _label(key), _NAMES[key](value)
    return _label(key), _plain(value)


def _with_unit(value: object, show: Callable[[float], str]) -> str:
    """`value` written by `show`: a number, or each number of a mapping keyed by num_workers
    ("1 worker: 235 samples/s, 2 workers: 461 samples/s"); anything else as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return show(float(value))
    if isinstance(value, Mapping) and value:
        parts = []
        for k, v in value.items():
            name = counted(int(k), "worker") if str(k).isdigit() else _label(str(k)).lower()
            parts.append(f"{name}: {_with_unit(v, show)}")
        return ", ".join(parts)
    return _plain(value)


def evidence_rows(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every piece of evidence but the sweep table, as (label, value with unit)."""
    return [evidence_value(k, v) for k, v in evidence.items() if k not in HIDDEN]

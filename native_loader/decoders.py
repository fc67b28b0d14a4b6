"""Per-sample decoders and collate for the datasets: the user's transform, or a default decoder.

They live with the runtime because an exported DataLoader module uses them at training time
(with only torch and native_loader installed); the advisor's trial times the same functions.
Datasets hand a transform either an object's bytes (anything with the buffer protocol) or, for
WebDataset tar shards, a dict {"__key__": ..., "<ext>": bytes}. Decoders return tensors, so a
DataLoader (and pin_memory) handles them like real training input.
"""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "DEFAULT_DECODERS",
    "Transform",
    "collate_list",
    "decode_image",
    "decode_lines",
    "decode_npy",
    "decode_raw",
    "decode_sample",
    "default_decoder",
    "load_transform",
    "on_payload",
]

Transform = Callable[[Any], Any]
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png")


def decode_image(data: Any) -> torch.Tensor:
    """JPEG/PNG bytes -> HWC uint8 tensor (full decode, the usual first step of a CV pipeline)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(memoryview(data))) as image:
        return torch.from_numpy(np.asarray(image.convert("RGB")).copy())


def decode_npy(data: Any) -> torch.Tensor:
    import numpy as np

    return torch.from_numpy(np.load(io.BytesIO(memoryview(data)), allow_pickle=False))


def decode_lines(data: Any) -> torch.Tensor:
    """Text/JSONL -> number of records parsed (the parse is the cost we time)."""
    records = 0
    for line in bytes(memoryview(data)).splitlines():
        if not line.strip():
            continue
        if line.lstrip().startswith(b"{"):
            json.loads(line)
        else:
            line.decode("utf-8")
        records += 1
    return torch.tensor(records)


def decode_raw(data: Any) -> torch.Tensor:
    """Unknown binary: the bytes as a uint8 tensor, copied once (the reader may reuse the
    buffer it handed over, so a view would change under the tensor); no other CPU work."""
    view = memoryview(data)
    if len(view) == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(view), dtype=torch.uint8)


def decode_sample(sample: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A WebDataset sample: images decoded, class labels parsed, other fields raw."""
    out: dict[str, torch.Tensor] = {}
    for field, value in sample.items():
        if field.startswith("__"):
            continue
        ext = field.rsplit(".", 1)[-1].lower()
        if ext in IMAGE_EXTENSIONS:
            out[field] = decode_image(value)
        elif ext in ("cls", "label"):
            out[field] = torch.tensor(int(bytes(memoryview(value)).strip() or b"0"))
        elif ext == "npy":
            out[field] = decode_npy(value)
        else:
            out[field] = decode_raw(value)
    return out


class PayloadTransform:
    """A transform of one object's bytes, applied to a WebDataset sample that holds one object:
    its payload, the one member other than ``__key__`` (and a ``cls`` label). `python -m advisor
    reshard` packs each object so, named by its key and extension (``{"__key__": "cat/1",
    "jpg": bytes, "cls": b"0"}``); the advisor's trial sweeps a packed sample through this."""

    def __init__(self, transform: Transform) -> None:
        self.transform = transform

    def __call__(self, sample: dict[str, Any]) -> Any:
        fields = [k for k in sample if not k.startswith("__") and k != "cls"]
        if len(fields) != 1:
            raise ValueError(
                f"a packed sample holds one object; {sample.get('__key__')!r} holds {fields}"
            )
        return self.transform(sample[fields[0]])


def on_payload(transform: Transform) -> PayloadTransform:
    """`transform`, written for single objects' bytes, for the tar samples of packed shards
    (`PayloadTransform`): ``make_dataloader(transform=on_payload(my_transform))``."""
    return PayloadTransform(transform)


DEFAULT_DECODERS: dict[str, Transform] = {
    "jpeg": decode_image,
    "png": decode_image,
    "tar": decode_sample,
    "npy": decode_npy,
    "jsonl": decode_lines,
    "text": decode_lines,
}


def default_decoder(fmt: str) -> Transform:
    return DEFAULT_DECODERS.get(fmt, decode_raw)


def load_transform(spec: str) -> Transform:
    """Import "package.module:callable"; clear errors for every way it can be wrong."""
    return load_callable(spec, "transform")


def load_callable(spec: str, what: str) -> Any:
    """Import the callable "package.module:attribute" that the user names as their `what` (a
    transform, a loader, a step), with one clear line for every way it can be wrong."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {what} module {module_name!r}: {exc}") from exc
    except Exception as exc:  # the user's module itself raised while it was imported
        lines = str(exc).strip().splitlines()
        detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise ValueError(f"your {what} module {module_name!r} failed at import: {detail}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{what} {spec!r} is not callable")
    return target


def collate_list(batch: list[Any]) -> list[Any]:
    """Keep a batch as a list: decoded images differ in size, so they cannot be stacked. Samples
    a map dataset skipped (None, `SamplePolicy("skip")`) are left out. The list is a
    `native_loader.batch.SampleList`: from a worker, its tensors cross in one shared block."""
    from native_loader.batch import SampleList

    return SampleList(sample for sample in batch if sample is not None)

"""Moving the loader's batches to the GPU.

A DataLoader with `pin_memory=True` hands out batches in page-locked memory; only a copy made with
`non_blocking=True` then runs asynchronously (the GPU's copy engine overlaps the previous step).
`to_device` applies that to the nested lists, tuples and dicts the datasets yield.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["to_device"]


def to_device(batch: Any, device: str | torch.device = "cuda") -> Any:
    """`batch` with every tensor in it moved to `device` (asynchronously where it is pinned).

    A pageable tensor is copied synchronously whatever `non_blocking` says, so asking for it is
    always safe; other values (keys, strings, numbers) are returned as they are.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        moved = [to_device(value, device) for value in batch]
        return moved if isinstance(batch, list) else type(batch)(moved)
    return batch

"""A batch kept as a list of samples that crosses from a DataLoader worker in one shared block.

A DataLoader worker hands each tensor of a batch to the training process through its own
shared-memory segment (a file descriptor sent over a socket, a mapping on each side). A list of
32 decoded images is 32 of them per batch: with 2 workers on 2 cores, lists of 3x224x224 uint8
tensors cross at about 2,700 samples/s, the same tensors stacked into one at about 7,500, and
as a `SampleList` at about 6,800 (`python -m bench handover`). `SampleList` is the list
`collate_list` returns; when it is pickled for that hand-over, its CPU tensors (top level, or
inside tuples, lists and dicts) are copied into one shared block per dtype, and the training
process gets a list of views into it: the same values and shapes (contiguous), one segment per
dtype instead of one per tensor. Pickled anywhere else (a deepcopy, a save), it is a plain list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class _Slot:
    """Where one tensor lies in its dtype's block."""

    dtype: torch.dtype
    offset: int
    shape: tuple[int, ...]

    def view(self, blocks: dict[torch.dtype, torch.Tensor]) -> torch.Tensor:
        numel = 1
        for n in self.shape:
            numel *= n
        return blocks[self.dtype][self.offset : self.offset + numel].view(self.shape)


# a batch whose first sample is none of these holds no tensor to pack (samples are alike)
_CONTAINERS = (torch.Tensor, tuple, list, dict)


def _packable(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and type(value) is torch.Tensor  # subclasses keep their own pickling
        and value.device.type == "cpu"
        and value.layout == torch.strided
        and not value.requires_grad
        and not value.is_quantized
    )


def _skeleton(
    value: Any, found: list[tuple[_Slot, torch.Tensor]], sizes: dict[torch.dtype, int]
) -> Any:
    """`value` with each packable tensor replaced by its `_Slot` (found: each with its tensor)."""
    if _packable(value):
        slot = _Slot(value.dtype, sizes.get(value.dtype, 0), tuple(value.shape))
        sizes[value.dtype] = slot.offset + value.numel()
        found.append((slot, value))
        return slot
    if type(value) in (list, tuple):
        return type(value)(_skeleton(v, found, sizes) for v in value)
    if type(value) is dict:
        return {k: _skeleton(v, found, sizes) for k, v in value.items()}
    return value


def _filled(value: Any, blocks: dict[torch.dtype, torch.Tensor]) -> Any:
    if isinstance(value, _Slot):
        return value.view(blocks)
    if type(value) in (list, tuple):
        return type(value)(_filled(v, blocks) for v in value)
    if type(value) is dict:
        return {k: _filled(v, blocks) for k, v in value.items()}
    return value


def _unpack(skeleton: list[Any], blocks: dict[torch.dtype, torch.Tensor]) -> SampleList:
    return SampleList(_filled(skeleton, blocks))


class SampleList(list[Any]):
    """A batch's samples, a plain list to its user; pickled (a worker's hand-over), its tensors
    travel in one shared block per dtype."""

    def __reduce__(self) -> tuple[Any, ...]:
        plain = (SampleList, (list(self),))
        if not self or type(self[0]) not in _CONTAINERS:
            return plain  # a batch of text or bytes: nothing to pack, no walk over its items
        from torch.utils.data import get_worker_info

        if get_worker_info() is None:  # not a worker's hand-over (a copy, a save): as it is
            return plain
        found: list[tuple[_Slot, torch.Tensor]] = []
        sizes: dict[torch.dtype, int] = {}
        skeleton = _skeleton(list(self), found, sizes)
        if len(found) < 2:
            return plain
        try:
            # allocated shared: the hand-over then moves no second copy into shared memory
            blocks = {d: torch.empty(n, dtype=d).share_memory_() for d, n in sizes.items()}
            for slot, tensor in found:
                slot.view(blocks).copy_(tensor)
        except (RuntimeError, OSError):
            # a batch that fails to pickle in a worker's feeder thread is lost and the training
            # loop waits for it for ever: fall back to sharing each tensor on its own
            return plain
        return (_unpack, (skeleton, blocks))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

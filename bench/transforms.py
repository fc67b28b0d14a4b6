"""Per-sample transforms with a known CPU cost, for the advisor's quality matrix."""

from __future__ import annotations

import time
from typing import Any

import torch


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def raw(sample: Any) -> torch.Tensor:
    """~0 CPU: the sample's size only."""
    return torch.tensor(len(memoryview(sample)))


def burn_2ms(sample: Any) -> torch.Tensor:
    _burn(0.002)
    return raw(sample)


def burn_8ms(sample: Any) -> torch.Tensor:
    _burn(0.008)
    return raw(sample)


def burn_0_3ms(sample: Any) -> torch.Tensor:
    _burn(0.0003)
    return raw(sample)


def burn_6ms(sample: Any) -> torch.Tensor:
    _burn(0.006)
    return raw(sample)


def decode_resize(sample: Any) -> torch.Tensor:
    """A CV pipeline's first steps: a full Pillow decode of a JPEG, resized to 224 x 224
    (bilinear), as a CHW uint8 tensor."""
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(memoryview(sample))) as image:
        resized = image.convert("RGB").resize((224, 224), Image.Resampling.BILINEAR)
    return torch.from_numpy(np.asarray(resized).copy()).permute(2, 0, 1)

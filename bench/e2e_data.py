"""The data `python -m bench e2e` reads: ~100 KB JPEGs and ~150 MB text shards, uploaded once."""

from __future__ import annotations

import io
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

BUCKET = "e2e"
TEXT_SHARD_BYTES = 150_000_000
LINE_BYTES = 1000


def jpeg_images(count: int) -> list[bytes]:
    """`count` distinct ~100 KB JPEGs (640x480, smooth gradients with noise, quality 85)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:480, 0:640]
    out = []
    for i in range(count):
        base = np.stack([(x * (i % 7 + 1) + y) % 256, (y * 2 + i) % 256, (x + y * 3) % 256], -1)
        noise = rng.normal(0, 9, base.shape)
        pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, "JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def text_shard(index: int) -> bytes:
    """~TEXT_SHARD_BYTES of lines of ~LINE_BYTES words (one document per line)."""
    import random

    rng = random.Random(index)
    words = [f"w{rng.randrange(50_000)}" for _ in range(20_000)]
    block = []
    for _ in range(1000):
        n = rng.randrange(LINE_BYTES // 12, LINE_BYTES // 4)
        block.append(" ".join(rng.choices(words, k=n)))
    chunk = ("\n".join(block) + "\n").encode()
    return chunk * (TEXT_SHARD_BYTES // len(chunk))


def upload(client: Any, images: int, shards: int) -> dict[str, list[str]]:
    """`images` JPEGs under images/ and `shards` text shards under text/; the keys of each."""
    client.create_bucket(Bucket=BUCKET)
    image_keys = [f"img-{i:05d}.jpg" for i in range(images)]
    bodies = dict(zip(image_keys, jpeg_images(images), strict=True))

    def put(key: str) -> None:
        client.put_object(Bucket=BUCKET, Key=f"images/{key}", Body=bodies[key])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, image_keys))
    shard_keys = [f"shard-{i:04d}.txt" for i in range(shards)]
    for i, key in enumerate(shard_keys):
        with tempfile.NamedTemporaryFile() as f:
            f.write(text_shard(i))
            f.flush()
            client.upload_file(f.name, BUCKET, f"text/{key}")  # multipart, as boto3 does it
    return {"images": image_keys, "text": shard_keys}

"""What the re-shard tests share: small class-folder data sets, locally and on S3."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from native_loader.tar import iter_samples

SHARD = 64 * 1024  # the smallest shard size the config allows: several shards from ~100 KB


def make_files(count: int = 60, classes: int = 3, seed: int = 7) -> dict[str, bytes]:
    """`class_k/img_nnnn.jpg` (2-4 KB of random bytes) plus a `.json` beside every third one."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    for i in range(count):
        folder = f"class_{i % classes}"
        files[f"{folder}/img_{i:04d}.jpg"] = rng.randbytes(rng.randint(2000, 4000))
        if i % 3 == 0:
            files[f"{folder}/img_{i:04d}.json"] = json.dumps({"i": i}).encode()
    return files


def write_local(root: Path, files: dict[str, bytes]) -> Path:
    for key, data in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def upload(client: Any, bucket: str, prefix: str, files: dict[str, bytes]) -> str:
    for key, data in files.items():
        client.put_object(Bucket=bucket, Key=prefix + key, Body=data)
    return f"s3://{bucket}/{prefix}"


def local_shards(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.tar"))}


def s3_shards(client: Any, bucket: str, prefix: str) -> dict[str, bytes]:
    found = {}
    for item in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
        if item["Key"].endswith(".tar"):
            body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            found[item["Key"][len(prefix) :]] = body
    return found


def samples_of(shards: dict[str, bytes]) -> dict[str, dict[str, bytes]]:
    """Every sample of every shard by key; asserts that keys are unique across shards."""
    samples: dict[str, dict[str, bytes]] = {}
    for data in shards.values():
        for sample in iter_samples(data):
            key = sample.pop("__key__")
            assert key not in samples, f"duplicate key {key}"
            samples[key] = sample
    return samples


def digests(shards: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in shards.items()}


def environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(extra)
    return env

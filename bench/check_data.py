"""The data the advice checks read (`bench advisor-check`, `bench plan-check`), and the S3
endpoint that serves it: the demo SeaweedFS at a raised priority, with a latency proxy in a
process of its own per latency (`bench.netem`).

Objects are (name, bytes) pairs: one random body repeated, distinct Pillow-made JPEGs,
WebDataset tar shards of JPEGs with `.cls` labels, or JSONL shards of text records.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from advisor.demo.datasets import DemoSpec, iter_samples
from advisor.demo.server import S3Server
from advisor.measure.hardware.host import child_pids
from bench.netem import proxy_process, raise_priority
from native_loader import Credentials
from native_loader.tarwriter import build_tar

Objects = list[tuple[str, bytes]]


def random_objects(count: int, size: int) -> Objects:
    """`count` objects of one random body of `size` bytes."""
    body = os.urandom(size)
    return [(f"{i:05d}.bin", body) for i in range(count)]


def jpeg_objects(count: int, size: int, tar_samples: int = 0) -> Objects:
    """`count` JPEGs of about `size` bytes (half to 1.5 times it), or with `tar_samples`,
    `count` tar shards of that many JPEGs each, with a `.cls` label beside each."""
    kb = size // 1024
    images = count * max(tar_samples, 1)
    spec = DemoSpec(images=images, image_kb=(kb // 2, kb * 3 // 2), classes=1, seed=7)
    jpegs = [(f"{i:05d}", jpeg) for i, _, jpeg in iter_samples(spec)]
    if not tar_samples:
        return [(f"{key}.jpg", jpeg) for key, jpeg in jpegs]
    shards = []
    for shard in range(count):
        mine = jpegs[shard * tar_samples : (shard + 1) * tar_samples]
        members = [m for key, jpeg in mine for m in ((f"{key}.cls", b"0"), (f"{key}.jpg", jpeg))]
        shards.append((f"shard-{shard:05d}.tar", build_tar(members)))
    return shards


def jsonl_shards(count: int, records: int, words: int = 40) -> Objects:
    """`count` JSONL shards of `records` records each: an id, a label and a text of `words`
    words drawn from a small vocabulary (about 300 bytes a line)."""
    rng = random.Random(7)
    vocabulary = [f"{a}{b}" for a in ("lo", "re", "ta", "mi", "su", "ka") for b in
                  ("der", "num", "vis", "pol", "ant", "ex", "quo", "ri")]  # fmt: skip
    shards = []
    for shard in range(count):
        lines = []
        for i in range(records):
            text = " ".join(rng.choices(vocabulary, k=words))
            record = {"id": shard * records + i, "label": rng.randrange(10), "text": text}
            lines.append(json.dumps(record))
        shards.append((f"shard-{shard:05d}.jsonl", ("\n".join(lines) + "\n").encode()))
    return shards


@dataclass(frozen=True)
class Endpoints:
    """The S3 endpoint's URL per first-byte latency added (0: the server itself), and its
    credentials (also in this process's AWS_* variables, for the exported modules)."""

    urls: dict[int, str]
    credentials: Credentials
    pids: frozenset[int] = frozenset()  # the server's and the proxies' processes


def serve_s3(
    stack: contextlib.ExitStack, bucket: str, sets: Mapping[str, Objects],
    latencies: Iterable[int],
) -> Endpoints:  # fmt: skip
    """Start SeaweedFS (closed with `stack`), upload each set under its prefix of `bucket`, and
    put a latency proxy in front of it per latency in `latencies` (90 MB/s per connection).
    The exported modules read with the standard AWS chain, as a user's job does: this
    process's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set to the server's."""
    started_before = child_pids()
    server = S3Server()
    endpoint = stack.enter_context(server)
    creds = Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)
    os.environ["AWS_ACCESS_KEY_ID"] = creds.access_key
    os.environ["AWS_SECRET_ACCESS_KEY"] = creds.secret_key
    client = endpoint.boto3_client()
    client.create_bucket(Bucket=bucket)
    for prefix, objects in sets.items():
        for name, body in objects:
            client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=body)
    if server.pid is not None:
        raise_priority(server.pid)
    urls = {0: endpoint.url}
    for latency in sorted(set(latencies) - {0}):
        urls[latency] = stack.enter_context(proxy_process(endpoint.url, latency, 90.0))
    return Endpoints(urls, creds, frozenset(child_pids() - started_before))

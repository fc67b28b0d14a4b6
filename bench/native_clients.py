"""The reader bench's native_loader clients: `read_many` over listed objects or plain URIs, and
`open_many` streaming each object part by part."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bench.client_run import Feed, Reader, Spec, check_size


def _native_reader(spec: Spec) -> tuple[Any, str]:
    """An S3Reader for the spec and the URI prefix of its keys: ``s3://bucket/`` or, for a
    ``file://`` endpoint (the local scenario), the folder that holds the bucket's files."""
    from native_loader import Credentials, ReaderConfig, S3Reader

    if spec.endpoint.startswith("file://"):
        local = ReaderConfig(
            max_inflight_requests=spec.concurrency,
            max_inflight_bytes=max(256 * 2**20, 2 * spec.part_size * spec.concurrency),
            part_size=spec.part_size,
        )
        return S3Reader(local), f"{spec.endpoint[len('file://') :]}/{spec.bucket}/"
    config = ReaderConfig(
        endpoint_url=spec.endpoint,
        region=spec.region,
        unsigned=not spec.signed,
        addressing_style="path",
        max_inflight_requests=spec.concurrency,
        max_inflight_bytes=max(256 * 2**20, 2 * spec.part_size * spec.concurrency),
        part_size=spec.part_size,
    )
    creds = Credentials(spec.access_key, spec.secret_key) if spec.signed else None
    return S3Reader(config, credentials=creds), f"s3://{spec.bucket}/"


def make_native(spec: Spec, listed: bool = True) -> tuple[Reader, Callable[[], None]]:
    """native_loader `read_many(..., ordered=True)`. With `listed` (the default, what its
    datasets do) the items are `ObjectInfo` carrying the size a listing gives, so the reader
    reserves the right number of bytes and starts every part of a large object at once; without
    it (`native-uri`) they are plain URIs."""
    import native_loader

    reader, prefix = _native_reader(spec)
    info = getattr(native_loader, "ObjectInfo", None) if listed else None

    def read(feed: Feed) -> tuple[int, int]:
        sizes: dict[str, int] = {}

        def items() -> Iterator[Any]:
            for key, size in feed:
                sizes[key] = size
                uri = prefix + key
                yield uri if info is None else info(uri, key, size, "")

        objects = nbytes = 0
        for result in reader.read_many(items(), ordered=True):
            n = len(result)
            check_size(n, sizes[result.uri[len(prefix) :]], result.uri)
            objects += 1
            nbytes += n
        return objects, nbytes

    return read, reader.close


def make_native_uri(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    return make_native(spec, listed=False)


def make_native_stream(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """native_loader `open_many` over listed objects: each object streamed part by part
    (`read_ahead_bytes` = concurrency parts ahead), its chunks taken and dropped."""
    import dataclasses

    from native_loader import ObjectInfo

    reader, prefix = _native_reader(spec)
    window = spec.concurrency * spec.part_size
    config = dataclasses.replace(
        reader.config,
        read_ahead_bytes=window,
        max_inflight_bytes=max(reader.config.max_inflight_bytes, window),
    )
    reader.close()
    reader = type(reader)(config, credentials=getattr(reader, "_credentials", None))

    def read(feed: Feed) -> tuple[int, int]:
        sizes: dict[str, int] = {}

        def infos() -> Iterator[Any]:  # pulled as the read-ahead reaches them
            for key, size in feed:
                sizes[prefix + key] = size
                yield ObjectInfo(prefix + key, key, size, "")

        objects = nbytes = 0
        for stream in reader.open_many(infos()):
            n = sum(len(chunk) for chunk in stream.chunks())
            check_size(n, sizes[stream.uri], stream.uri)
            objects += 1
            nbytes += n
        return objects, nbytes

    return read, reader.close

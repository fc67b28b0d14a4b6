"""The reader bench's peer clients in Python, each reading whole objects the way a PyTorch user
would without native_loader: `open` on local files, boto3, s3fs, s3torchconnector and awscrt."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from bench.client_run import Feed, Reader, Spec, check_size


def make_open(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """Local files only: Python's ``open(path, "rb").read()``, in a thread pool of
    `concurrency` threads (1: in the consumer's thread), results in order."""
    if not spec.endpoint.startswith("file://"):
        raise SystemExit("open: local files only (a file:// endpoint)")
    folder = f"{spec.endpoint[len('file://') :]}/{spec.bucket}/"

    def get(key: str, size: int) -> int:
        with open(folder + key, "rb") as f:
            n = len(f.read())
        check_size(n, size, key)
        return n

    pool = ThreadPoolExecutor(spec.concurrency) if spec.concurrency > 1 else None

    def read(feed: Feed) -> tuple[int, int]:
        if pool is None:
            sizes = [get(key, size) for key, size in feed]
            return len(sizes), sum(sizes)
        return _windowed(pool, feed, 2 * spec.concurrency, get)

    def close() -> None:
        if pool is not None:
            pool.shutdown()

    return read, close


def _boto3_client(spec: Spec, pool: int) -> Any:
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    config = Config(
        s3={"addressing_style": "path"},
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=max(10, pool),
        signature_version=None if spec.signed else UNSIGNED,
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=spec.endpoint,
        region_name=spec.region,
        aws_access_key_id=spec.access_key or "anonymous",
        aws_secret_access_key=spec.secret_key or "anonymous",
        config=config,
    )


def make_boto3(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """boto3 `get_object(...)["Body"].read()`: sequential at concurrency 1, else a thread pool."""
    client = _boto3_client(spec, spec.concurrency)

    def get(key: str, size: int) -> int:
        body = client.get_object(Bucket=spec.bucket, Key=key)["Body"].read()
        check_size(len(body), size, key)
        return len(body)

    if spec.concurrency == 1:

        def read_seq(feed: Feed) -> tuple[int, int]:
            objects = nbytes = 0
            for key, size in feed:
                nbytes += get(key, size)
                objects += 1
            return objects, nbytes

        return read_seq, client.close

    pool = ThreadPoolExecutor(spec.concurrency)

    def read_pool(feed: Feed) -> tuple[int, int]:
        return _windowed(pool, feed, spec.concurrency * 2, get)

    def close() -> None:
        pool.shutdown()
        client.close()

    return read_pool, close


def _windowed(
    pool: ThreadPoolExecutor, feed: Feed, window: int, get: Callable[[str, int], int]
) -> tuple[int, int]:
    """Keep `window` calls of `get` queued on the pool, pulling keys from the feed."""
    pending: set[Future[int]] = set()
    objects = nbytes = 0
    exhausted = False
    while True:
        while not exhausted and len(pending) < window:
            item = next(feed, None)
            if item is None:
                exhausted = True
            else:
                pending.add(pool.submit(get, *item))
        if not pending:
            return objects, nbytes
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            nbytes += future.result()
            objects += 1


def make_s3fs(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """s3fs `cat` of a batch of paths (asyncio, aiobotocore); batch = 4 x concurrency paths."""
    import s3fs

    fs = s3fs.S3FileSystem(
        anon=not spec.signed,
        key=spec.access_key if spec.signed else None,
        secret=spec.secret_key if spec.signed else None,
        endpoint_url=spec.endpoint,
        client_kwargs={"region_name": spec.region},
        config_kwargs={
            "s3": {"addressing_style": "path"},
            "max_pool_connections": spec.concurrency,
        },
        max_concurrency=spec.concurrency,
        skip_instance_cache=True,
        use_listings_cache=False,
    )
    batch_bytes = max(256 * 2**20, max(spec.sizes))

    def read(feed: Feed) -> tuple[int, int]:
        objects = nbytes = 0
        while True:
            batch: list[tuple[str, int]] = []
            total = 0
            for item in feed:
                batch.append(item)
                total += item[1]
                if len(batch) >= 4 * spec.concurrency or total >= batch_bytes:
                    break
            if not batch:
                return objects, nbytes
            paths = [f"{spec.bucket}/{key}" for key, _ in batch]
            out = fs.cat(paths, batch_size=spec.concurrency, on_error="raise")
            for path, size in zip(paths, (s for _, s in batch), strict=True):
                check_size(len(out[path]), size, path)
            objects += len(batch)
            nbytes += total

    return read, lambda: None


def make_s3torch(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """s3torchconnector's S3Client (mountpoint-s3-client on the AWS CRT): one
    `get_object(...).read()` per object on a pool of `concurrency` threads."""
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client

    if spec.signed:
        os.environ["AWS_ACCESS_KEY_ID"] = spec.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = spec.secret_key
    client = S3Client(
        spec.region,
        endpoint=spec.endpoint,
        s3client_config=S3ClientConfig(
            force_path_style=True, unsigned=not spec.signed, part_size=spec.part_size
        ),
    )

    def get(key: str, size: int) -> int:
        data = client.get_object(spec.bucket, key).read()
        check_size(len(data), size, key)
        return len(data)

    pool = ThreadPoolExecutor(spec.concurrency)

    def read(feed: Feed) -> tuple[int, int]:
        return _windowed(pool, feed, spec.concurrency * 2, get)

    return read, pool.shutdown


def make_awscrt(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """awscrt.s3.S3Client with `concurrency` GET_OBJECT meta-requests in flight; bodies are
    written into a preallocated bytearray per object from the `on_body` callback."""
    from urllib.parse import urlsplit

    from awscrt import auth, http, io, s3

    host = urlsplit(spec.endpoint).netloc
    signing = None
    if spec.signed:
        provider = auth.AwsCredentialsProvider.new_static(spec.access_key, spec.secret_key)
        signing = s3.create_default_s3_signing_config(
            region=spec.region, credential_provider=provider
        )
    resolver = io.DefaultHostResolver(io.EventLoopGroup(1))
    bootstrap = io.ClientBootstrap(io.EventLoopGroup(), resolver)
    client = s3.S3Client(
        bootstrap=bootstrap,
        region=spec.region,
        tls_mode=s3.S3RequestTlsMode.DISABLED,
        signing_config=signing,
        part_size=spec.part_size,
        throughput_target_gbps=100.0,
    )

    def read(feed: Feed) -> tuple[int, int]:
        cond = threading.Condition()
        state = {"inflight": 0, "objects": 0, "bytes": 0}
        errors: list[BaseException] = []
        keep: set[Any] = set()

        def start(key: str, size: int) -> None:
            buf = bytearray(size)
            view = memoryview(buf)
            received = [0]

            def on_body(chunk: Any, offset: int, **_: Any) -> None:
                n = len(chunk)
                view[offset : offset + n] = chunk
                received[0] += n

            def on_done(error: BaseException | None = None, **_: Any) -> None:
                with cond:
                    state["inflight"] -= 1
                    if error is not None or received[0] != size:
                        errors.append(error or RuntimeError(f"{key}: {received[0]} of {size}"))
                    else:
                        state["objects"] += 1
                        state["bytes"] += size
                    cond.notify()

            headers = http.HttpHeaders([("Host", host)])
            request = http.HttpRequest("GET", f"/{spec.bucket}/{key}", headers)
            with cond:
                state["inflight"] += 1
            meta = client.make_request(
                type=s3.S3RequestType.GET_OBJECT,
                request=request,
                on_body=on_body,
                on_done=on_done,
            )
            keep.add(meta)

        exhausted = False
        while True:
            with cond:
                while state["inflight"] >= spec.concurrency and not errors:
                    cond.wait(1.0)
                if errors:
                    raise RuntimeError(f"awscrt read failed: {errors[0]!r}")
                if exhausted and state["inflight"] == 0:
                    return state["objects"], state["bytes"]
            if exhausted:
                with cond:
                    cond.wait(0.05)
                continue
            item = next(feed, None)
            if item is None:
                exhausted = True
            else:
                start(*item)
            if len(keep) > 4 * spec.concurrency:
                keep.clear()  # finished requests are kept alive by the CRT until on_done

    return read, lambda: None

"""One S3 client per process: read a list of objects for a bounded time and report what it cost.

    python -m bench.clients <client> --json --spec spec.json

The spec (JSON, written by `bench.reader_bench`) names the endpoint, whether requests are signed,
the bucket, the keys with their sizes, the client's knob (`concurrency`) and the time bounds. The
client prints one JSON object on stdout: objects and bytes read in the timed phase, wall seconds,
CPU seconds (user + sys of this process, all threads, timed phase only; for `curl` and `wrk` the
whole tool process, from `os.wait4`) and peak RSS (VmHWM of the process, whole lifetime; for
`curl` and `wrk` the tool's, sampled every 20 ms).

Every client gets the whole object into memory (a bytes-like object of the object's size) except
`curl` and `wrk`, which discard bodies and are the ceiling. Each run has an untimed warm-up (opens
connections, loads lazy modules) and then a timed phase that cycles over the keys until
`seconds` have passed or `max_objects` were handed out, whichever comes first.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import own_peak_rss_mib

WARMUP_MAX_S = 1.0
TOOL_TIMEOUT_MARGIN_S = 60.0


@dataclass(frozen=True)
class Spec:
    """What one client run reads and how (the orchestrator writes it as JSON).

    endpoint: base URL, e.g. ``http://127.0.0.1:8333``.
    signed: sign requests with SigV4 (SeaweedFS) or send them anonymously (nginx, the proxy).
    access_key, secret_key, region: credentials and signing region (ignored when unsigned).
    bucket: bucket name; keys are addressed path-style (``endpoint/bucket/key``).
    keys: object keys; sizes: their sizes in bytes (same order).
    concurrency: the client's knob (threads, requests in flight, connections). Default 1.
    part_size: bytes per ranged GET for clients that split large objects. Default 8 MiB.
    seconds: target length of the timed phase in seconds. Default 3.
    max_objects: most objects handed out in the timed phase. Default 1,000,000.
    warmup_objects: objects read before timing (at most `WARMUP_MAX_S`). Default 0 = automatic.
    """

    endpoint: str
    signed: bool
    bucket: str
    keys: list[str]
    sizes: list[int]
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    region: str = "us-east-1"
    concurrency: int = 1
    part_size: int = 8 * 2**20
    seconds: float = 3.0
    max_objects: int = 1_000_000
    warmup_objects: int = 0

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.sizes) or not self.keys:
            raise ValueError(f"{len(self.keys)=} must equal {len(self.sizes)=} and be > 0")
        if self.concurrency < 1:
            raise ValueError(f"{self.concurrency=} must be >= 1")
        if not 0 < self.seconds <= 600:
            raise ValueError(f"{self.seconds=} must be in (0, 600] seconds")

    def url(self, key: str) -> str:
        return f"{self.endpoint}/{self.bucket}/{key}"


@dataclass(frozen=True)
class Measurement:
    """What one client run measured (printed as JSON).

    objects, bytes: read completely in the timed phase. wall_s: its wall time in seconds.
    cpu_s: user + sys CPU seconds of the client in the timed phase. peak_rss_mb: VmHWM in MiB.
    """

    client: str
    concurrency: int
    objects: int
    bytes: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    errors: int = 0
    note: str = ""


class Feed:
    """Thread-safe cycle over (key, size) until a deadline or a count; the timed phase's input."""

    def __init__(self, spec: Spec, seconds: float, max_objects: int, start: int = 0) -> None:
        self._items = list(zip(spec.keys, spec.sizes, strict=True))
        self._deadline = time.monotonic() + seconds
        self._left = max_objects
        self._next = start
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return self

    def __next__(self) -> tuple[str, int]:
        with self._lock:
            if self._left <= 0 or time.monotonic() >= self._deadline:
                raise StopIteration
            self._left -= 1
            item = self._items[self._next % len(self._items)]
            self._next += 1
            return item

    def take(self, n: int) -> list[tuple[str, int]]:
        out = []
        for item in self:
            out.append(item)
            if len(out) >= n:
                break
        return out


# A client reads everything the feed hands out and returns (objects, bytes) fully read.
Reader = Callable[[Feed], tuple[int, int]]


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_rss_mb() -> float:
    return own_peak_rss_mib() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _check(data_len: int, size: int, key: str) -> None:
    if data_len != size:
        raise RuntimeError(f"{key}: read {data_len} bytes, expected {size}")


Maker = Callable[[Spec], tuple[Reader, Callable[[], None]]]


def measure(name: str, spec: Spec, make: Maker) -> Measurement:
    """Warm up, then time one phase of `spec.seconds`; the client's own CPU and RSS."""
    read, close = make(spec)
    try:
        warm = spec.warmup_objects or min(len(spec.keys), max(8, 2 * spec.concurrency))
        read(Feed(spec, WARMUP_MAX_S, warm, start=len(spec.keys) // 2))
        cpu0, t0 = _cpu_s(), time.perf_counter()
        objects, nbytes = read(Feed(spec, spec.seconds, spec.max_objects))
        wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    finally:
        close()
    return Measurement(name, spec.concurrency, objects, nbytes, wall, cpu, _peak_rss_mb())


# --- clients ------------------------------------------------------------------------------------


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
            _check(n, sizes[result.uri[len(prefix) :]], result.uri)
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
            _check(n, sizes[stream.uri], stream.uri)
            objects += 1
            nbytes += n
        return objects, nbytes

    return read, reader.close


def make_open(spec: Spec) -> tuple[Reader, Callable[[], None]]:
    """Local files only: Python's ``open(path, "rb").read()``, in a thread pool of
    `concurrency` threads (1: in the consumer's thread), results in order."""
    if not spec.endpoint.startswith("file://"):
        raise SystemExit("open: local files only (a file:// endpoint)")
    folder = f"{spec.endpoint[len('file://') :]}/{spec.bucket}/"

    def get(key: str, size: int) -> int:
        with open(folder + key, "rb") as f:
            n = len(f.read())
        _check(n, size, key)
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
        _check(len(body), size, key)
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
                _check(len(out[path]), size, path)
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
        _check(len(data), size, key)
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


# --- command-line tools (the ceiling) --------------------------------------------------------


def _run_tool(args: list[str], timeout_s: float) -> tuple[str, float, float]:
    """Run a tool to completion; (stdout, wall seconds, peak RSS MiB sampled from VmHWM every
    20 ms). Its CPU lands in RUSAGE_CHILDREN of this process once it is reaped."""
    # Read from this process, which the tool's figures leave out (its CPU is the tool's
    # RUSAGE_CHILDREN, its RSS the tool's VmHWM); imported here, where no Python client runs.
    from advisor.measure.hardware.host import peak_rss_bytes

    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], peak_rss_bytes(proc.pid) / 2**20)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    finally:
        sampler.join(timeout=1.0)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {proc.returncode}: {err.decode()[-500:]}")
    return out.decode(), wall, peak[0]


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _curl_config(spec: Spec, items: list[tuple[str, int]], path: Path) -> None:
    lines = []
    for key, _ in items:
        lines.append(f'url = "{spec.url(key)}"\noutput = "/dev/null"\n')
    path.write_text("".join(lines))


def run_curl(spec: Spec) -> Measurement:
    """`curl --parallel --parallel-max N` over a config of URLs (signed with --aws-sigv4 when the
    endpoint needs it). A calibration pass over the keys sizes the timed list to `seconds`."""
    curl = shutil.which("curl") or "/usr/bin/curl"
    base = [curl, "--silent", "--show-error", "--fail", "--parallel", "--parallel-immediate"]
    base += ["--parallel-max", str(spec.concurrency), "--max-time", "120"]
    base += ["--write-out", "%{size_download}\\n"]
    if spec.signed:
        base += ["--aws-sigv4", f"aws:amz:{spec.region}:s3"]
        base += ["--user", f"{spec.access_key}:{spec.secret_key}"]
    with tempfile.TemporaryDirectory(prefix="bench-curl-") as tmp:
        cfg = Path(tmp) / "urls.txt"
        items = list(zip(spec.keys, spec.sizes, strict=True))
        # Calibration (untimed for the result): one pass, or the first objects of a large set.
        calib = items[: max(1, min(len(items), spec.max_objects))]
        _curl_config(spec, calib, cfg)
        t0 = time.perf_counter()
        _run_tool([*base, "--config", str(cfg)], spec.seconds * 20 + TOOL_TIMEOUT_MARGIN_S)
        rate = len(calib) / max(time.perf_counter() - t0, 1e-3)
        count = int(min(spec.max_objects, max(len(items), rate * spec.seconds)))
        timed = [items[i % len(items)] for i in range(count)]
        _curl_config(spec, timed, cfg)
        cpu0 = _children_cpu_s()
        out, wall, peak = _run_tool(
            [*base, "--config", str(cfg)], spec.seconds * 20 + TOOL_TIMEOUT_MARGIN_S
        )
        cpu = _children_cpu_s() - cpu0
    sizes = [int(x) for x in out.split()]
    expected = sum(size for _, size in timed)
    errors = len(timed) - len(sizes) + (0 if sum(sizes) == expected else 1)
    return Measurement(
        "curl",
        spec.concurrency,
        len(sizes),
        sum(sizes),
        wall,
        cpu,
        peak,
        errors=errors,
    )


WRK_SCRIPT = """
local paths = {}
for line in io.lines("%(paths)s") do paths[#paths + 1] = line end
local counter = 0
function setup(thread)
  thread:set("offset", counter * 7919)
  counter = counter + 1
end
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[((i + offset) %% #paths) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\nWRKJSON {"requests": %%d, "bytes": %%d, "duration_us": %%d, '
    .. '"errors": %%d}\\n', summary.requests, summary.bytes, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def run_wrk(spec: Spec) -> Measurement:
    """`wrk` with a Lua script rotating over the object paths; unsigned only (nginx). Bytes count
    headers too (wrk reports bytes read from the socket)."""
    if spec.signed:
        raise SystemExit("wrk cannot sign requests; use it on the unsigned endpoint only")
    wrk = shutil.which("wrk") or "/usr/bin/wrk"
    threads = max(1, min(2, spec.concurrency))
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        paths = Path(tmp) / "paths.txt"
        paths.write_text("".join(f"/{spec.bucket}/{key}\n" for key in spec.keys))
        script = Path(tmp) / "rotate.lua"
        script.write_text(WRK_SCRIPT % {"paths": paths})
        duration = max(1, math.ceil(spec.seconds))
        args = [wrk, "-t", str(threads), "-c", str(spec.concurrency), "-d", f"{duration}s"]
        args += ["--timeout", "30s", "-s", str(script), spec.endpoint]
        cpu0 = _children_cpu_s()
        out, _, peak = _run_tool(args, duration + TOOL_TIMEOUT_MARGIN_S)
        cpu = _children_cpu_s() - cpu0
    line = next(x for x in out.splitlines() if x.startswith("WRKJSON "))
    summary = json.loads(line[len("WRKJSON ") :])
    mean = sum(spec.sizes) / len(spec.sizes)
    # wrk counts header bytes; report body bytes as requests x mean size for comparability.
    requests = summary["requests"]
    return Measurement(
        "wrk",
        spec.concurrency,
        requests,
        int(requests * mean),
        summary["duration_us"] / 1e6,
        cpu,
        peak,
        errors=summary["errors"],
        note=f"socket bytes {summary['bytes']}",
    )


PYTHON_CLIENTS: dict[str, Maker] = {
    "native": make_native,
    "native-uri": make_native_uri,
    "native-stream": make_native_stream,
    "open": make_open,
    "boto3": make_boto3,
    "s3fs": make_s3fs,
    "s3torchconnector": make_s3torch,
    "awscrt": make_awscrt,
}
TOOL_CLIENTS: dict[str, Callable[[Spec], Measurement]] = {"curl": run_curl, "wrk": run_wrk}
CLIENTS = sorted([*PYTHON_CLIENTS, *TOOL_CLIENTS])


def run(name: str, spec: Spec) -> Measurement:
    if name in TOOL_CLIENTS:
        return TOOL_CLIENTS[name](spec)
    return measure(name, spec, PYTHON_CLIENTS[name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clients", description=__doc__)
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--spec", required=True, type=Path, help="JSON file with a Spec")
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    args = parser.parse_args(argv)
    spec = Spec(**json.loads(args.spec.read_text()))
    result = run(args.client, spec)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

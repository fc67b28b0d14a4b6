"""Streamed reads (`S3Reader.open`, `open_many`) through the fault proxy in front of SeaweedFS, and
of local files: every byte right, no hang, memory bounded by the read-ahead, cancellation frees
the budget, and an object overwritten mid-stream is a clear error."""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from advisor.demo.proxy import NetworkProfile
from advisor.demo.server import S3Endpoint
from native_loader import ReaderConfig, S3Error, S3Reader, _native
from native_loader import stream as stream_module
from native_loader.local_pool import submit_local
from native_loader.object_stream import iter_streams
from native_loader.stream import FIRST_PART_BYTES, PIECE_BYTES, PartPipeline, StreamSource
from testing import Faults, When
from tests.native.conftest import PART, through_proxy

READ_AHEAD = 4 * PART
# the shared proxied reader, with a read-ahead of four parts
_through_proxy = functools.partial(through_proxy, read_ahead_bytes=READ_AHEAD)


def _idle(reader: S3Reader) -> tuple[int, int, int]:
    deadline = time.monotonic() + 5
    while True:
        stats = reader.stats()
        state = (stats["active_requests"], stats["open_tickets"], stats["inflight_bytes"])
        if state == (0, 0, 0) or time.monotonic() > deadline:
            return state
        time.sleep(0.02)


def test_stream_reads_every_size_in_every_way(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    sizes = [0, 1, PART - 1, PART, PART + 1, 10 * PART + 7]
    objects = {f"o/{n:08d}": os.urandom(n) for n in sizes}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    with _through_proxy(s3_endpoint) as (reader, _):
        for key, data in objects.items():
            uri = f"s3://{s3_bucket}/{key}"
            with reader.open(uri) as stream:
                assert stream.read() == data
                assert stream.size == len(data)
            with reader.open(uri) as stream:
                assert b"".join(bytes(c) for c in stream.chunks()) == data
            with reader.open(uri) as stream:
                pieces = iter(lambda: stream.read(1000), b"")
                assert b"".join(pieces) == data
            with reader.open(uri) as stream:
                buffer = bytearray(len(data) + 10)
                view, got = memoryview(buffer), 0
                while n := stream.readinto(view[got:]):
                    got += n
                assert buffer[:got] == data
        infos = list(reader.list(f"s3://{s3_bucket}/o/"))
        for info, stream in zip(infos, reader.open_many(infos), strict=True):
            assert stream.read() == objects[info.key]
        assert _idle(reader) == (0, 0, 0)


def test_lines_and_readline(s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str) -> None:
    text = b"".join(b"line %d %s\n" % (i, b"x" * (i % 300)) for i in range(3000)) + b"tail"
    s3_client.put_object(Bucket=s3_bucket, Key="t.txt", Body=text)
    with _through_proxy(s3_endpoint) as (reader, _):
        with reader.open(f"s3://{s3_bucket}/t.txt") as stream:
            assert list(stream) == text.splitlines(keepends=True)
        with reader.open(f"s3://{s3_bucket}/t.txt") as stream:
            assert stream.readline() == b"line 0 \n"
            assert stream.readline(4) == b"line"


def test_memory_is_bounded_by_the_read_ahead(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    data = os.urandom(60 * PART)
    s3_client.put_object(Bucket=s3_bucket, Key="big", Body=data)
    with _through_proxy(s3_endpoint, max_inflight_bytes=64 * PART) as (reader, _):
        got = bytearray()
        with reader.open(f"s3://{s3_bucket}/big") as stream:
            for chunk in stream.chunks():
                got += chunk
                time.sleep(0.002)  # a consumer slower than the network
        assert got == data
        # the window (4 parts) plus the first part before the size is known
        assert reader.stats()["peak_inflight_bytes"] <= READ_AHEAD + PART


@pytest.mark.parametrize(
    "faults",
    [
        Faults(reset=When(every_n=3)),
        Faults(slow_down=When(every_n=4)),
        Faults(truncate=When(every_n=3), truncate_at=0.3),
        Faults(reset_mid_body=When(every_n=4), reset_at=0.6),
    ],
    ids=["reset", "slow_down", "truncate", "reset_mid_body"],
)
def test_failed_parts_are_retried_by_range(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, faults: Faults
) -> None:
    objects = {f"f/{i}": os.urandom(5 * PART + 1000 * i) for i in range(4)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    with _through_proxy(s3_endpoint, faults) as (reader, proxy):
        uris = [f"s3://{s3_bucket}/{k}" for k in objects]
        got = [stream.read() for stream in reader.open_many(uris)]
        assert got == list(objects.values())
        injected = sum(proxy.stats().faults_injected.values())
        assert injected >= 4
        # curl itself resends a request whose kept-alive connection was reset before any answer
        assert 1 <= reader.stats()["retries"] <= injected
        assert _idle(reader) == (0, 0, 0)


def test_small_first_and_aligned_parts_survive_faults(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    # parts above FIRST_PART_BYTES: a small first part, then parts ending on part_size multiples
    part = 2 * FIRST_PART_BYTES
    objects = {f"a/{i}": os.urandom(2 * part + 777 * i + 1) for i in range(3)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    faults = Faults(reset_mid_body=When(every_n=3), reset_at=0.5)
    settings = {"part_size": part, "read_ahead_bytes": 4 * part, "max_inflight_bytes": 8 * part}
    with _through_proxy(s3_endpoint, faults, **settings) as (reader, proxy):
        uris = [f"s3://{s3_bucket}/{k}" for k in objects]
        got = [stream.read() for stream in reader.open_many(uris)]
        assert got == list(objects.values())
        assert sum(proxy.stats().faults_injected.values()) >= 2
        assert _idle(reader) == (0, 0, 0)


def test_objects_read_ahead_start_with_a_whole_part(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    part = 2 * FIRST_PART_BYTES
    objects = {f"w/{i}": os.urandom(part) for i in range(6)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    settings = {"part_size": part, "read_ahead_bytes": 4 * part, "max_inflight_bytes": 8 * part}
    with _through_proxy(s3_endpoint, **settings) as (reader, proxy):
        infos = [reader.stat(f"s3://{s3_bucket}/{k}") for k in objects]
        before = proxy.stats().requests
        got = [stream.read() for stream in reader.open_many(infos)]
        assert got == list(objects.values())
        # the first object in two parts (a small first one: the consumer waits for it), the
        # five read ahead in one whole part each
        assert proxy.stats().requests - before == 2 + 5


def test_parts_end_on_part_size_multiples(tmp_path: Path, monkeypatch: Any) -> None:
    part = 2 * FIRST_PART_BYTES
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_bytes(os.urandom(2 * part + 3))
    second.write_bytes(os.urandom(part + part // 2))
    requested: list[tuple[str, int, int]] = []

    def recorded(fn: Any, path: str, offset: int, length: int) -> Any:
        requested.append((Path(path).name, offset, length))
        return submit_local(fn, path, offset, length)

    monkeypatch.setattr(stream_module, "submit_local", recorded)
    config = ReaderConfig(part_size=part, read_ahead_bytes=4 * part)
    with S3Reader(config) as reader:
        got = [s.read() for s in reader.open_many([str(first), str(second)])]
    assert got == [first.read_bytes(), second.read_bytes()]
    small = FIRST_PART_BYTES
    assert requested == [
        # the consumer waits for the first object's first part: a small one, then aligned
        ("a", 0, small),
        ("a", small, part - small),
        ("a", part, part),
        ("a", 2 * part, 3),
        # the next object's first part is fetched ahead: a whole part
        ("b", 0, part),
        ("b", part, part // 2),
    ]


def test_a_part_size_for_the_streams_overrides_the_configs(
    tmp_path: Path, monkeypatch: Any
) -> None:
    part = 2 * FIRST_PART_BYTES
    path = tmp_path / "a"
    path.write_bytes(os.urandom(5 * part + 3))
    requested: list[tuple[int, int]] = []

    def recorded(fn: Any, file: str, offset: int, length: int) -> Any:
        requested.append((offset, length))
        return submit_local(fn, file, offset, length)

    monkeypatch.setattr(stream_module, "submit_local", recorded)
    config = ReaderConfig(part_size=part, read_ahead_bytes=4 * part)
    with S3Reader(config) as reader:
        with reader.open(str(path), part_size=2 * part) as stream:
            assert stream.read() == path.read_bytes()
        small = FIRST_PART_BYTES
        # parts end on multiples of the stream's part size (a multiple of the config's)
        head = [(0, small), (small, 2 * part - small)]
        assert requested == [*head, (2 * part, 2 * part), (4 * part, part + 3)]
        for wrong in (2**10, 1.5 * part, True):
            with pytest.raises(ValueError, match="part_size"):
                reader.open(str(path), part_size=wrong)  # type: ignore[arg-type]


def test_the_window_starts_small_and_doubles_per_part_handed_over(
    tmp_path: Path, monkeypatch: Any
) -> None:
    part = 2 * FIRST_PART_BYTES
    path = tmp_path / "w"
    path.write_bytes(os.urandom(20 * part))
    in_flight: list[int] = []
    original = stream_module.PartPipeline.next_piece

    def recorded(pipeline: Any) -> Any:
        got = original(pipeline)
        in_flight.append(len(pipeline._queue))
        return got

    monkeypatch.setattr(stream_module.PartPipeline, "next_piece", recorded)
    config = ReaderConfig(part_size=part, read_ahead_bytes=16 * part)
    with S3Reader(config) as reader, reader.open(str(path)) as stream:
        assert sum(len(c) for c in stream.chunks()) == 20 * part
    # after 1, 2, 3 parts handed over: 4, 8, 16 parts may be in flight (then the 16 of the
    # read-ahead, until the object runs out)
    assert in_flight[:4] == [4, 8, 16, 16]
    assert [stream_module.opened_window(n) for n in range(4)] == [2, 4, 8, 16]


def test_a_streams_part_size_is_one_ranged_get_per_part(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    part = 2 * FIRST_PART_BYTES
    data = os.urandom(6 * part)
    s3_client.put_object(Bucket=s3_bucket, Key="p", Body=data)
    settings = {"part_size": part, "read_ahead_bytes": 4 * part, "max_inflight_bytes": 8 * part}
    with _through_proxy(s3_endpoint, **settings) as (reader, proxy):
        info = reader.stat(f"s3://{s3_bucket}/p")
        before = proxy.stats().requests
        with reader.open(info, part_size=3 * part) as stream:
            assert stream.read() == data
        # a small first part, the rest of the first 3-part span, then one 3-part GET
        assert proxy.stats().requests - before == 3
        assert reader.stats()["peak_active_requests"] <= 2


def test_a_streams_read_ahead_bounds_its_parts_in_flight(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    data = os.urandom(12 * PART)
    s3_client.put_object(Bucket=s3_bucket, Key="r", Body=data)
    with _through_proxy(s3_endpoint) as (reader, _):
        info = reader.stat(f"s3://{s3_bucket}/r")
        with reader.open(info, read_ahead_bytes=PART) as stream:
            assert stream.read() == data
        assert reader.stats()["peak_active_requests"] == 1  # READ_AHEAD would allow 4
        with pytest.raises(ValueError, match="read_ahead_bytes"):
            reader.open(info, read_ahead_bytes=-1)


@pytest.mark.parametrize(
    ("part_mib", "read_ahead_mib", "inflight_mib", "expected_mib"),
    [
        (8, 128, 256, 24),  # the defaults: two parts of 3 x part_size in flight
        (8, 64, 32, 16),  # two parts within the in-flight budget
        (8, 8, 256, 8),  # never below part_size
        (4, 128, 256, 12),
    ],
)
def test_parsed_streams_keep_two_larger_parts_in_flight(
    part_mib: int, read_ahead_mib: int, inflight_mib: int, expected_mib: int
) -> None:
    mib = 2**20
    config = ReaderConfig(
        part_size=part_mib * mib,
        read_ahead_bytes=read_ahead_mib * mib,
        max_inflight_bytes=inflight_mib * mib,
    )
    part, read_ahead = stream_module.parsed_stream(config)
    assert part == expected_mib * mib and part % config.part_size == 0
    assert read_ahead == min(2 * part, stream_module.stream_budget(config))


@pytest.mark.timing
def test_a_stalled_part_is_retried_without_a_hang(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    data = os.urandom(8 * PART)
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=data)
    faults = Faults(stall=When(requests=(3,)), stall_s=8, stall_at=0.5)
    start = time.monotonic()
    with (
        _through_proxy(s3_endpoint, faults, stall_timeout_s=0.5) as (reader, _),
        reader.open(f"s3://{s3_bucket}/k") as stream,
    ):
        assert stream.read() == data
    assert time.monotonic() - start < 5


def test_a_retry_that_sees_another_object_raises_object_changed(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    old, new = os.urandom(6 * PART), os.urandom(6 * PART)
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=old)
    # The second part's first attempt gets 503; its retry waits at least 0.5 s, by which time
    # the object has been overwritten (same size, new ETag).
    faults = Faults(slow_down=When(requests=(2,)))
    settings = {"read_ahead_bytes": PART, "backoff_base_s": 1.0, "backoff_max_s": 1.0}
    with _through_proxy(s3_endpoint, faults, **settings) as (reader, _):
        with reader.open(f"s3://{s3_bucket}/k") as stream:
            assert stream.read(PART) == old[:PART]
            s3_client.put_object(Bucket=s3_bucket, Key="k", Body=new)
            with pytest.raises(S3Error, match="object changed") as info:
                stream.read()
            assert info.value.code == "ObjectChanged"
        assert _idle(reader) == (0, 0, 0)


def test_a_changed_size_is_caught_too(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=os.urandom(6 * PART))
    with _through_proxy(s3_endpoint) as (reader, _):
        info = reader.stat(f"s3://{s3_bucket}/k")
        s3_client.put_object(Bucket=s3_bucket, Key="k", Body=os.urandom(7 * PART))
        with reader.open(info) as stream, pytest.raises(S3Error, match="object changed"):
            stream.read()


def test_breaking_out_cancels_and_frees_the_budget(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    for i in range(3):
        s3_client.put_object(Bucket=s3_bucket, Key=f"c/{i}", Body=os.urandom(40 * PART))
    # latency keeps parts in flight when the loop is left
    with _through_proxy(s3_endpoint, network=NetworkProfile(latency_ms=30)) as (reader, _):
        uris = [f"s3://{s3_bucket}/c/{i}" for i in range(3)]
        for stream in reader.open_many(uris):
            stream.read(PART // 2)
            break
        assert _idle(reader) == (0, 0, 0)
        stream = reader.open(uris[0])
        stream.read(10)
        del stream  # abandoned without close: collected, its parts cancelled
        assert _idle(reader) == (0, 0, 0)
        requests = reader.stats()["requests"]
        assert requests < 2 * (READ_AHEAD // PART + 2), "abandoned streams kept fetching"


def test_local_files_stream_through_the_same_interface(tmp_path: Path) -> None:
    files = {tmp_path / f"f{n}": os.urandom(n) for n in (0, 5, PART, 3 * PART + 3)}
    for path, data in files.items():
        path.write_bytes(data)
    config = ReaderConfig(part_size=PART, read_ahead_bytes=READ_AHEAD)
    with S3Reader(config) as reader:
        for path, data in files.items():
            with reader.open(str(path)) as stream:
                assert stream.read() == data
        infos = list(reader.list(f"{tmp_path}/"))
        streams = zip(infos, reader.open_many(infos), strict=True)
        got = {info.uri: stream.read() for info, stream in streams}
        assert got == {str(p): d for p, d in files.items()}
        with pytest.raises(FileNotFoundError):
            reader.open(str(tmp_path / "missing")).read()


def test_streams_work_from_threads(s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str) -> None:
    objects = {f"p/{i}": os.urandom(3 * PART + i) for i in range(6)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    errors: list[BaseException] = []
    with _through_proxy(s3_endpoint) as (reader, _):

        def work(key: str) -> None:
            try:
                with reader.open(f"s3://{s3_bucket}/{key}") as stream:
                    assert stream.read() == objects[key]
            except BaseException as error:  # the main thread reports it
                errors.append(error)

        threads = [threading.Thread(target=work, args=(k,)) for k in objects]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert not errors


def test_the_documented_example_runs() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "native-loader.md").read_text()
    section = doc[doc.index("## Streams") :]
    example = section[section.index("```python\n") + 10 : section.index("```\n", 10)]
    exec(compile(example, "docs/native-loader.md", "exec"), {})


def test_local_reads_start_ahead_within_the_budget(tmp_path: Path) -> None:
    from native_loader.local import LocalRead, start_local_reads

    started: list[str] = []

    class Recorded(LocalRead):
        def start(self) -> None:
            started.append(self.path)
            self.future = object()  # type: ignore[assignment]

    reads = [Recorded(f"u{i}", f"p{i}", 40) for i in range(10)]
    start_local_reads(iter(reads), max_reads=4, max_bytes=100)
    assert started == ["p0", "p1"]  # 3 x 40 B would pass 100 B
    start_local_reads(iter(reads), max_reads=4, max_bytes=1000)
    assert started == ["p0", "p1", "p2", "p3"]  # at most 4 at once
    huge = [Recorded("u", "big", 10**9)]
    start_local_reads(iter(huge), max_reads=4, max_bytes=100)
    assert started[-1] == "big"  # the oldest read always starts
    files = {tmp_path / f"{i:02d}": os.urandom(1000 * i) for i in range(30)}
    for path, data in files.items():
        path.write_bytes(data)
    with S3Reader(ReaderConfig(max_inflight_requests=4)) as reader:
        got = [bytes(r) for r in reader.read_many(str(p) for p in files)]
        assert got == list(files.values())
        unordered = {
            r.uri: bytes(r) for r in reader.read_many(reader.list(f"{tmp_path}/"), ordered=False)
        }
        assert unordered == {str(p): d for p, d in files.items()}
        with pytest.raises(FileNotFoundError):
            list(reader.read_many([str(tmp_path / "missing")]))


def _pieces(stream: Any) -> list[bytes]:
    return [bytes(chunk) for chunk in stream.chunks()]


def test_a_part_is_handed_over_in_pieces_as_it_arrives(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    part = 4 * PIECE_BYTES
    data = os.urandom(3 * part + 12345)
    s3_client.put_object(Bucket=s3_bucket, Key="p", Body=data)
    slow = NetworkProfile(bandwidth_mbps=10)  # a 4 MiB part takes 0.4 s: the consumer waits
    settings = {"part_size": part, "read_ahead_bytes": 2 * part, "max_inflight_bytes": 4 * part}
    with _through_proxy(s3_endpoint, network=slow, **settings) as (reader, _):
        with reader.open(f"s3://{s3_bucket}/p") as stream:
            pieces = _pieces(stream)
        assert b"".join(pieces) == data
        # parts of 1, 3, 4, 4 MiB and the rest; a consumer that waits gets each a MiB or more
        # at a time, before all of it has arrived (and what is left once it has)
        assert len(pieces) > 5
        assert max(len(p) for p in pieces) < part
        assert _idle(reader) == (0, 0, 0)


def test_a_part_reset_after_pieces_were_handed_over_resumes_with_the_right_bytes(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    part = 4 * PIECE_BYTES
    objects = {f"r/{i}": os.urandom(3 * part + 999 * i) for i in range(2)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    faults = Faults(reset_mid_body=When(every_n=2), reset_at=0.7)
    slow = NetworkProfile(bandwidth_mbps=10)
    settings = {"part_size": part, "read_ahead_bytes": 2 * part, "max_inflight_bytes": 4 * part}
    with _through_proxy(s3_endpoint, faults, network=slow, **settings) as (reader, proxy):
        uris = [f"s3://{s3_bucket}/{k}" for k in objects]
        got = [_pieces(stream) for stream in reader.open_many(uris)]
        assert [b"".join(p) for p in got] == list(objects.values())
        assert sum(len(p) for p in got) > 2 * 5  # handed over in pieces
        assert proxy.stats().faults_injected["reset_mid_body"] >= 2
        assert reader.stats()["retries"] >= 2
        assert _idle(reader) == (0, 0, 0)


def test_a_retry_after_pieces_that_sees_another_object_raises_object_changed(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    part = 4 * PIECE_BYTES
    old, new = os.urandom(3 * part), os.urandom(3 * part)
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=old)
    # The second part (3 MiB, after a first part of 1 MiB) is reset after 70% of its body; its
    # retry waits at least 1 s, by which time the object has been overwritten (new ETag).
    faults = Faults(reset_mid_body=When(requests=(2,)), reset_at=0.7)
    settings = {
        "part_size": part,
        "read_ahead_bytes": part,  # one part in flight: requests in order
        "max_inflight_bytes": 4 * part,
        "backoff_base_s": 1.0,
        "backoff_max_s": 1.0,
    }
    with _through_proxy(s3_endpoint, faults, **settings) as (reader, _):
        with reader.open(f"s3://{s3_bucket}/k") as stream:
            chunks = stream.chunks()
            first, piece = bytes(next(chunks)), bytes(next(chunks))
            assert len(first) == FIRST_PART_BYTES and len(piece) < part - FIRST_PART_BYTES
            assert first + piece == old[: len(first) + len(piece)]  # the old object's bytes
            s3_client.put_object(Bucket=s3_bucket, Key="k", Body=new)
            with pytest.raises(S3Error, match="object changed") as info:
                list(chunks)
            assert info.value.code == "ObjectChanged"
        assert _idle(reader) == (0, 0, 0)


class _EngineUnderLoad:
    """The answers a real engine gives under load, where a waiter can run between the body's
    last byte and the end of the transfer (the engine thread's next round): each GET is first
    all readable but unfinished, and finished at the next wait."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects
        self.tickets: dict[int, tuple[str, int, int, int]] = {}  # key, start, end, waits

    def submit_get(self, bucket: str, key: str, offset: int, length: int, **_: Any) -> int:
        end = min(offset + length, len(self.objects[key]))
        self.tickets[len(self.tickets) + 1] = (key, offset, end, 0)
        return len(self.tickets)

    def wait_readable(self, ticket: int, min_bytes: int, timeout_s: float) -> Any:
        key, start, end, waits = self.tickets[ticket]
        self.tickets[ticket] = (key, start, end, waits + 1)
        return SimpleNamespace(**self._answer(ticket), readable=end - start, complete=waits > 0)

    def take(self, ticket: int) -> Any:
        return SimpleNamespace(**self._answer(ticket), error_kind=_native.ErrorKind.NONE)

    def _answer(self, ticket: int) -> dict[str, Any]:
        key, start, end, _ = self.tickets[ticket]
        data = _native.buffer_from(self.objects[key][start:end])
        return {"data": data, "object_size": len(self.objects[key]), "etag": '"1"'}

    def cancel(self, ticket: int) -> None:
        pass


def test_a_part_whose_bytes_are_in_before_its_end_keeps_its_stream_in_order() -> None:
    part = 4 * PIECE_BYTES
    objects = {
        "a": os.urandom(PIECE_BYTES),  # its first part (waited for) is exactly a piece
        "b": os.urandom(PIECE_BYTES + 5),  # fetched ahead as a whole part: shorter than that
        "c": os.urandom(part + 7),
    }
    engine = _EngineUnderLoad(objects)

    def unexpected(outcome: Any, uri: str) -> None:
        raise AssertionError(uri)

    # a's size known (a listing's), so b's first part is asked for while a's is in the queue
    sizes = {"a": len(objects["a"]), "b": -1, "c": -1}
    sources = [StreamSource(f"s3://b/{k}", bucket="b", key=k, size=sizes[k]) for k in objects]
    pipeline = PartPipeline(lambda: engine, sources, part, 2, unexpected)  # type: ignore[arg-type,return-value]
    got = [b"".join(_pieces(stream)) for stream in iter_streams(pipeline)]
    assert got == list(objects.values())


def test_objects_of_piece_and_part_sizes_stream_in_order(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    # a first part of exactly a piece, objects ending on a piece or short of a whole part, sizes
    # unknown until their first answer: each stream gets its own bytes, and ends with its object
    part = 4 * PIECE_BYTES
    sizes = [PIECE_BYTES, 2 * PIECE_BYTES, part - 1, part + PIECE_BYTES, 3 * PIECE_BYTES + 5]
    objects = {f"s/{i}": os.urandom(n) for i, n in enumerate(sizes)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    slow = NetworkProfile(bandwidth_mbps=10)
    settings = {"part_size": part, "read_ahead_bytes": 2 * part, "max_inflight_bytes": 4 * part}
    with _through_proxy(s3_endpoint, network=slow, **settings) as (reader, _):
        uris = [f"s3://{s3_bucket}/{k}" for k in objects]
        got = [b"".join(_pieces(stream)) for stream in reader.open_many(uris)]
        assert got == list(objects.values())
        assert _idle(reader) == (0, 0, 0)


@pytest.mark.timing
def test_an_object_overwritten_between_its_parts_says_it_changed(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    """A whole-object read in parts asks later parts for the first part's ETag (If-Match): an
    overwrite between them is refused by the server (HTTP 412), and the reader says what that
    means, as `prepare()` copying the object must, not 'PreconditionFailed (HTTP 412)'."""
    part = PIECE_BYTES
    old, new = os.urandom(12 * part), os.urandom(12 * part)
    s3_client.put_object(Bucket=s3_bucket, Key="w", Body=old)
    slow = NetworkProfile(bandwidth_mbps=10)  # a 1 MiB part takes 0.1 s, two at a time
    settings = {"part_size": part, "max_inflight_requests": 2}
    with _through_proxy(s3_endpoint, network=slow, **settings) as (reader, _):
        # parts after the first carry its ETag (If-Match): those sent after the overwrite fail
        overwrite = threading.Timer(0.3, s3_client.put_object, kwargs={
            "Bucket": s3_bucket, "Key": "w", "Body": new,
        })  # fmt: skip
        overwrite.start()
        try:
            with pytest.raises(S3Error, match="overwritten between its parts") as info:
                reader.read(f"s3://{s3_bucket}/w")
        finally:
            overwrite.join()
        assert info.value.code == "ObjectChanged"
        assert _idle(reader) == (0, 0, 0)

"""Streamed datasets: tar shards yield samples as their members arrive, text shards yield records
(lines, JSON Lines, CSV rows) split across ranks and workers, and leaving a loader early cancels
its reads."""

from __future__ import annotations

import collections
import csv
import io
import json
import os
import tarfile
import time
from typing import Any

import pytest
from torch.utils.data import DataLoader

from advisor.demo.server import S3Endpoint
from native_loader import (
    Credentials,
    ReaderConfig,
    S3IterableDataset,
    SampleError,
    SamplePolicy,
)
from native_loader import stream as stream_module
from native_loader.local_pool import submit_local
from native_loader.records import SLICE_BYTES, iter_lines, iter_records, record_blocks
from native_loader.tar import iter_samples, iter_samples_stream
from tests.native.conftest import forked_loader, list_batches, tar_bytes

PART = 64 * 2**10


def _config(endpoint: S3Endpoint, **overrides: Any) -> tuple[ReaderConfig, Credentials]:
    settings: dict[str, Any] = {"part_size": PART, "read_ahead_bytes": 4 * PART}
    settings.update(overrides)
    config = ReaderConfig(endpoint_url=endpoint.url, region=endpoint.region, **settings)
    return config, Credentials(endpoint.credentials.access_key, endpoint.credentials.secret_key)


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_streamed_tar_samples_match_the_whole_shard(fmt: int) -> None:
    long_dir = "d" * 90 + "/" + "e" * 60 if fmt != tarfile.USTAR_FORMAT else "d" * 90
    samples = {
        f"{long_dir}/s{i:03d}": {"jpg": os.urandom(700 * i), "cls": b"%d" % i} for i in range(9)
    }
    samples["short"] = {"seg.png": b"", "json": b"{}"}
    data = tar_bytes(samples, fmt)
    assert list(iter_samples_stream(io.BytesIO(data))) == list(iter_samples(data))
    with pytest.raises(ValueError, match="truncated"):
        list(iter_samples_stream(io.BytesIO(data[: len(data) // 2])))


def test_lines_and_records_across_chunk_boundaries() -> None:
    text = b"a,b\r\n1,x\n22,yy\n\n333,zzz"
    for cut in range(len(text) + 1):
        chunks = [text[:cut], text[cut:]]
        assert list(iter_lines(chunks)) == [b"a,b", b"1,x", b"22,yy", b"", b"333,zzz"]
    rows = list(iter_records([text[:7], text[7:]], "csv"))
    assert rows[0] == {"a": "1", "b": "x"} and rows[-1] == {"a": "333", "b": "zzz"}
    jsonl = b'{"a": 1}\n\n{"a": [2, 3]}\n'
    assert list(iter_records([jsonl[:5], jsonl[5:]], "jsonl")) == [{"a": 1}, {"a": [2, 3]}]
    assert list(iter_records([b"x\ny"], "lines")) == ["x", "y"]
    with pytest.raises(ValueError):
        iter_records([], "xml")  # type: ignore[arg-type]


def test_record_blocks_keep_the_records_before_one_that_fails() -> None:
    jsonl = b'{"a": 1}\n{"a": 2}\n{broken\n{"a": 4}\n'
    blocks = record_blocks([jsonl], "jsonl")
    assert next(blocks) == [{"a": 1}, {"a": 2}]
    with pytest.raises(json.JSONDecodeError):
        next(blocks)
    text = b"a\n" + b"".join(b"%d\n" % i for i in range(3000))
    assert [len(b) for b in record_blocks([text], "csv")] == [1024, 1024, 952]
    assert list(record_blocks([b""], "csv")) == []


@pytest.mark.parametrize("transform", [None, str], ids=["records as they are", "transformed"])
def test_a_json_line_that_fails_to_parse_is_skipped_alone(tmp_path: Any, transform: Any) -> None:
    (tmp_path / "0.jsonl").write_text('{"n": 0}\n{"n": 1}\n{bad\n{"n": 3}\n')
    (tmp_path / "1.jsonl").write_text("".join(f'{{"n": {i}}}\n' for i in range(10, 400)))
    policy = SamplePolicy("skip")
    dataset = S3IterableDataset(
        f"{tmp_path}/", records="jsonl", transform=transform, on_error=policy
    )
    expected = [{"n": i} for i in [0, 1, 3, *range(10, 400)]]
    assert list(dataset) == (expected if transform is None else [str(r) for r in expected])
    assert dataset.sample_stats() == {"samples_seen": len(expected) + 1, "samples_skipped": 1}
    with pytest.raises(SampleError, match=r"reading jsonl records failed on .*0\.jsonl"):
        list(S3IterableDataset(f"{tmp_path}/", records="jsonl", transform=transform))


def test_a_broken_json_line_loses_that_line_only(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    # 1,500 lines of ~1 KB: the shard spans slices and parts; two broken lines in the first
    lines = [json.dumps({"n": i, "pad": "p" * 1000}) for i in range(1500)]
    lines[40] = '{"n": 40, "pad": "cut short'
    body = "".join(line + "\n" for line in lines).encode()
    bad_utf8 = body.index(b'{"n": 900,') + 12
    body = body[:bad_utf8] + b"\xff" + body[bad_utf8 + 1 :]  # and one line not UTF-8
    s3_client.put_object(Bucket=s3_bucket, Key="text/0.jsonl", Body=body)
    s3_client.put_object(Bucket=s3_bucket, Key="text/1.jsonl", Body=b'{"n": 9000}\n')
    config, credentials = _config(s3_endpoint)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/text/", config=config, credentials=credentials, records="jsonl",
        on_error=SamplePolicy("skip"),
    )  # fmt: skip
    expected = [json.loads(line) for i, line in enumerate(lines) if i not in (40, 900)]
    assert list(dataset) == [*expected, {"n": 9000}]
    assert dataset.sample_stats() == {"samples_seen": 1501, "samples_skipped": 2}
    strict = S3IterableDataset(
        f"s3://{s3_bucket}/text/", config=config, credentials=credentials, records="jsonl"
    )
    with pytest.raises(SampleError, match=r"reading jsonl records failed on .*text/0\.jsonl"):
        list(strict)


def _csv_oracle(body: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body.decode("utf-8"), newline="")))


def test_a_quoted_csv_field_keeps_its_line_ends() -> None:
    body = b'id,text\r\n1,"line one\nline two"\r\n2,"a\r\nb, ""c"""\n3,plain\n4,"\n"'
    expected = _csv_oracle(body)
    assert expected[0]["text"] == "line one\nline two" and len(expected) == 4
    for cut in range(len(body) + 1):
        assert list(iter_records([body[:cut], body[cut:]], "csv")) == expected


def test_csv_records_that_span_slices_and_parts_read_as_csv_reads_them(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    out = io.StringIO()
    writer = csv.writer(out)  # "\r\n" ends a row; the fields hold "\n" and "\r\n"
    writer.writerow(["i", "text", "more"])
    for i in range(400):
        text = "\n".join(f'line {j} of {i}, "quoted"' for j in range(i % 7 + 1))
        writer.writerow([i, text, "x\r\ny" * (i % 5)])
    # fields of 112 KB (csv's limit is 128 KiB) of many lines: the first slice of 256 KiB ends
    # inside this record's quotes, at one of their line ends
    big = ["\n".join(f"{c}{j:05d}" for j in range(16_000)) for c in "abc"]
    writer.writerow(["big", *big[:2]])
    writer.writerow(["big2", big[2], ""])
    body = out.getvalue().encode()
    assert body.index(b"big,") < SLICE_BYTES < body.index(b"big2,")
    s3_client.put_object(Bucket=s3_bucket, Key="text/rows.csv", Body=body)
    config, credentials = _config(s3_endpoint)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/text/", config=config, credentials=credentials, records="csv"
    )
    expected = _csv_oracle(body)
    assert len(expected) == 402 and expected[1]["text"].count("\n") == 1
    assert list(dataset) == expected


def test_first_tar_sample_arrives_before_the_shard(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    samples = {f"s{i:04d}": {"bin": os.urandom(20_000)} for i in range(200)}  # ~4 MiB
    shard = tar_bytes(samples)
    s3_client.put_object(Bucket=s3_bucket, Key="tars/a.tar", Body=shard)
    config, credentials = _config(s3_endpoint)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/tars/", config=config, credentials=credentials, tar_samples=True
    )
    items = iter(dataset)
    first = next(items)
    assert first["__key__"] == "s0000" and first["bin"] == samples["s0000"]["bin"]
    # the first sample came with the first parts, not the whole shard
    assert dataset.reader.stats()["bytes_received"] <= 6 * PART < len(shard)
    rest = list(items)
    assert [s["__key__"] for s in [first, *rest]] == list(samples)
    assert dataset.reader.stats()["peak_inflight_bytes"] <= 5 * PART


def test_a_tar_shard_cut_inside_a_header_is_named_or_skipped(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    samples = {f"s{i:02d}": {"bin": os.urandom(3000 + i), "cls": b"%d" % i} for i in range(10)}
    shard = tar_bytes(samples)
    cut = shard.index(b"s06.bin") + 100  # inside the header of sample 6's first member
    for name, body in (("a", shard), ("b", shard[:cut]), ("c", shard)):
        s3_client.put_object(Bucket=s3_bucket, Key=f"tars/{name}.tar", Body=body)
    config, credentials = _config(s3_endpoint)
    uri = f"s3://{s3_bucket}/tars/"
    strict = S3IterableDataset(uri, config=config, credentials=credentials, tar_samples=True)
    with pytest.raises(SampleError, match=rf"reading the tar shard failed on {uri}b\.tar: .*trunc"):
        list(strict)
    skipping = S3IterableDataset(
        uri, config=config, credentials=credentials, tar_samples=True,
        on_error=SamplePolicy("skip", max_skipped_share=0.1),
    )  # fmt: skip
    keys = [sample["__key__"] for sample in skipping]
    # the samples before the cut, less s05 (its members might go on past the cut); the rest of
    # the shard is one sample skipped
    assert keys == [*samples, *list(samples)[:5], *samples]
    assert skipping.sample_stats() == {"samples_seen": 26, "samples_skipped": 1}


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("records", ["lines", "jsonl", "csv"])
def test_text_shards_yield_every_record_once_across_ranks_and_workers(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str, workers: int, records: str
) -> None:
    expected: list[Any] = []
    for shard in range(5):
        rows = [{"shard": str(shard), "i": str(i), "text": "w" * (i % 97)} for i in range(900)]
        if records == "lines":
            body = "".join(f"{r['shard']} {r['i']} {r['text']}\n" for r in rows).encode()
            expected += [f"{r['shard']} {r['i']} {r['text']}" for r in rows]
        elif records == "jsonl":
            body = "".join(json.dumps(r) + "\n" for r in rows).encode()
            expected += rows
        else:
            out = io.StringIO()
            writer = csv.DictWriter(out, ["shard", "i", "text"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            body = out.getvalue().encode()
            expected += rows
        s3_client.put_object(Bucket=s3_bucket, Key=f"text/{shard}.txt", Body=body)
    config, credentials = _config(s3_endpoint)
    seen: list[Any] = []
    for rank in range(2):
        dataset = S3IterableDataset(
            f"s3://{s3_bucket}/text/",
            config=config,
            credentials=credentials,
            records=records,  # type: ignore[arg-type]
            shuffle=True,
            shuffle_buffer=50,
            rank=rank,
            world_size=2,
        )
        loader = forked_loader(dataset, 64, workers)
        seen += [record for batch in loader for record in batch]
    key = json.dumps if records != "lines" else str
    assert collections.Counter(map(key, seen)) == collections.Counter(map(key, expected))


def test_records_from_local_files_and_through_the_cache(tmp_path: Any) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for shard in range(3):
        body = "".join(f'{{"n": {shard * 100 + i}}}\n' for i in range(100))
        (folder / f"{shard}.jsonl").write_text(body)
    config = ReaderConfig(part_size=PART, read_ahead_bytes=PART)
    streamed = S3IterableDataset(f"{folder}/", config=config, records="jsonl")
    cache_dir = tmp_path / "cache"
    cached = S3IterableDataset(f"{folder}/", config=config, records="jsonl", cache_dir=cache_dir)
    assert [r["n"] for r in streamed] == list(range(300))
    assert [r["n"] for r in cached] == list(range(300))  # a first epoch fills the cache
    assert len(list(cache_dir.glob("*.obj"))) == 3 and not list(cache_dir.glob("*.tmp"))
    cache = cached._cache.get()
    assert cache is not None and (cache.hits, cache.misses) == (0, 3)
    assert [r["n"] for r in cached] == list(range(300))  # later epochs stream the copies
    assert (cache.hits, cache.misses) == (3, 3)
    items = iter(cached)
    next(items)
    items.close()  # a shard left unfinished is not cached half
    assert not list(cache_dir.glob("*.tmp"))
    with pytest.raises(ValueError, match="exclude"):
        S3IterableDataset(f"{folder}/", records="lines", tar_samples=True)


def test_records_are_streamed_in_parsed_parts(tmp_path: Any, monkeypatch: Any) -> None:
    # a records stream reads the same memory in fewer, larger parts (stream.parsed_part_size)
    (tmp_path / "a.txt").write_bytes(b"".join(b"%07d\n" % i for i in range(100_000)))
    requested: list[int] = []

    def recorded(fn: Any, path: str, offset: int, length: int) -> Any:
        requested.append(length)
        return submit_local(fn, path, offset, length)

    monkeypatch.setattr(stream_module, "submit_local", recorded)
    config = ReaderConfig(part_size=PART, read_ahead_bytes=8 * PART)
    dataset = S3IterableDataset(f"{tmp_path}/", config=config, records="lines")
    assert list(dataset) == [f"{i:07d}" for i in range(100_000)]
    assert stream_module.parsed_stream(config) == (3 * PART, 6 * PART)
    assert requested == [3 * PART] * 4 + [800_000 - 12 * PART]


def test_a_tar_shard_streamed_into_the_cache(tmp_path: Any) -> None:
    folder = tmp_path / "tars"
    folder.mkdir()
    samples = {f"s{i:03d}": {"bin": os.urandom(3000), "cls": b"%d" % i} for i in range(40)}
    (folder / "a.tar").write_bytes(tar_bytes(samples))
    config = ReaderConfig(part_size=PART, read_ahead_bytes=PART)
    dataset = S3IterableDataset(
        f"{folder}/", config=config, tar_samples=True, cache_dir=tmp_path / "cache"
    )
    for _ in range(2):
        got = {s["__key__"]: {k: v for k, v in s.items() if k != "__key__"} for s in dataset}
        assert got == samples
    cache = dataset._cache.get()
    assert cache is not None and (cache.hits, cache.misses) == (1, 1)
    assert len(list((tmp_path / "cache").glob("*.obj"))) == 1


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_leaving_the_loader_early_cancels_the_reads(
    s3_endpoint: S3Endpoint, s3_client: Any, s3_bucket: str
) -> None:
    for shard in range(3):
        body = b"".join(b"%d line of text\n" % i for i in range(100_000))  # ~1.6 MB
        s3_client.put_object(Bucket=s3_bucket, Key=f"big/{shard}.txt", Body=body)
    config, credentials = _config(s3_endpoint)
    dataset = S3IterableDataset(
        f"s3://{s3_bucket}/big/", config=config, credentials=credentials, records="lines"
    )
    items = iter(dataset)
    assert next(items) == "0 line of text"
    items.close()  # what a `break` out of the loop does to the generator
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stats = dataset.reader.stats()
        if (stats["active_requests"], stats["open_tickets"], stats["inflight_bytes"]) == (0, 0, 0):
            break
        time.sleep(0.02)
    assert (stats["active_requests"], stats["open_tickets"], stats["inflight_bytes"]) == (0, 0, 0)
    assert stats["bytes_received"] < 10 * PART
    loader = DataLoader(
        dataset,
        batch_size=8,
        num_workers=2,
        collate_fn=list_batches,
        multiprocessing_context="fork",
    )
    for batch in loader:  # shutting the workers down mid-epoch neither hangs nor raises
        assert len(batch) == 8
        break
    del loader

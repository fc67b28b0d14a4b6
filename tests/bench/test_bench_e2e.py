"""`python -m bench e2e`'s own logic: statistics, bars, the table, and one real run of a loader."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import pytest

from advisor.measure.loop.results import Spread
from bench.e2e import tree_rss_sampler
from bench.e2e_data import jpeg_images
from bench.e2e_loaders import RunSpec, decode_resize, run
from bench.e2e_report import bar, bars, bars_table, derived, paired_ratio, table


def test_spread_ignores_failed_runs_and_shows_a_range() -> None:
    s = Spread.over([3.0, float("nan"), 1.0, 2.0])
    assert (s.median, s.low, s.high, s.n) == (2.0, 1.0, 3.0, 3)
    assert s.show("{:.1f}") == "2.0 (1.0-3.0)"
    assert Spread.over([5.0]).show("{:.0f}") == "5"
    assert Spread.over([]).show("{:.0f}") == "-"


def test_derived_rates_with_and_without_the_first_batch() -> None:
    raw = {"samples": 96, "first_batch_samples": 32, "first_batch_s": 2.0, "epoch_s": 4.0,
           "cpu_s": 0.96, "peak_rss_mb": 500.0}  # fmt: skip
    d = derived(raw)
    assert d["samples_per_s"] == pytest.approx(96 / 4.0)
    assert d["steady_samples_per_s"] == pytest.approx(64 / 2.0)
    assert d["cpu_ms_per_sample"] == pytest.approx(10.0)
    one_batch = derived(raw | {"samples": 32})
    assert one_batch["steady_samples_per_s"] == pytest.approx(32 / 4.0)
    assert math.isnan(d["later_samples_per_s"])  # one epoch: no later ones
    later = derived(raw | {"later_epoch_s": [1.0, 2.0, 0.5]})
    assert later["later_samples_per_s"] == pytest.approx(96 / 1.0)  # the median epoch


def test_bar_pairs_repetitions_against_the_best_peer_by_median() -> None:
    rates = {"exported": [300.0, 330.0, 270.0], "a": [100.0, 110.0, 90.0], "b": [150.0, 95.0, 90.0]}
    b = bar("x", rates, "exported", ["a", "b"], 3.0)
    assert b.against == "a"  # the best peer by median (100 against 95), not by its best run
    assert b.ratio.median == pytest.approx(3.0)
    assert b.met
    worse = bar("y", rates | {"b": [200.0, 200.0, 200.0]}, "exported", ["a", "b"], 2.0)
    assert worse.against == "b" and not worse.met
    assert bar("z", rates, "exported", ["missing"], 1.0).against == "not measured"
    assert math.isnan(paired_ratio([1.0], [0.0]).median)
    assert "MISSED" in bars_table([worse]) and "MET" in bars_table([b])


def test_table_shows_skipped_loaders_and_spreads() -> None:
    spread = {"median": 2.0, "low": 1.0, "high": 3.0, "n": 3}
    rows = [
        {"scenario": "s", "loader": "l w0", "workers": 0, "runs": 3, "samples_per_s": spread,
         "steady_samples_per_s": spread, "first_batch_s": spread, "epoch_s": spread,
         "peak_rss_mb": spread, "cpu_ms_per_sample": spread, "later_samples_per_s": spread,
         "server_cpu_s": spread},
        {"scenario": "s", "loader": "s3tc-map w0", "skipped": "not installed: s3torchconnector"},
    ]  # fmt: skip
    text = table(rows)
    assert "| s | l w0 | 0 | 2 (1-3) |" in text
    assert "skipped: not installed: s3torchconnector" in text
    assert all(line.count("|") == text.splitlines()[0].count("|") for line in text.splitlines())


def test_decode_resize_gives_a_fixed_shape_from_the_bench_jpegs() -> None:
    (image,) = jpeg_images(1)
    assert 50_000 < len(image) < 200_000  # the ~100 KB the benchmark states
    assert tuple(decode_resize(image).shape) == (3, 224, 224)


def test_tree_rss_sampler_counts_child_processes() -> None:
    code = "import os, time; b = bytearray(200 * 2**20); os.fork() or None; time.sleep(1)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    with tree_rss_sampler(proc.pid) as peak:
        proc.wait(timeout=20)
    assert peak[0] > 300  # two processes of >= 200 MiB each (shared pages count twice)


@pytest.mark.s3
def test_tutorial_loader_runs_the_training_loop(s3_endpoint, s3_bucket) -> None:  # type: ignore[no-untyped-def]
    client = s3_endpoint.boto3_client()
    keys = [f"img-{i}.jpg" for i in range(6)]
    for key, body in zip(keys, jpeg_images(6), strict=True):
        client.put_object(Bucket=s3_bucket, Key=f"images/{key}", Body=body)
    spec = RunSpec(loader="boto3", endpoint=s3_endpoint.url, bucket=s3_bucket, prefix="images/",
                   keys=keys, transform="decode", batch_size=4, num_workers=0, samples=6,
                   consumer_rate=1000.0, epochs=3)  # fmt: skip
    assert os.environ["AWS_ACCESS_KEY_ID"]  # conftest's dummy credentials, which the server takes
    result = run(spec)
    assert result.samples == 6 and result.first_batch_samples == 4
    assert 0 < result.first_batch_s <= result.epoch_s
    assert result.cpu_s > 0
    assert len(result.later_epoch_s) == 2 and all(s > 0 for s in result.later_epoch_s)


def test_exported_runs_fill_fresh_folders(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every run of a copy-local export copies into a folder of its own: the exported folder
    would hold the first run's copy, and the later runs would not read S3 at all. A cache
    folder is given only to an export that caches."""
    from bench.e2e_loaders import _CACHE_DIRS, _exported

    export = tmp_path / "exported.py"
    export.write_text(
        "CONFIG = {'local_copy_dir': '~/.cache/shared/copy', 'cache_dir': '~/.cache/shared'}\n"
        "def make_dataloader(**overrides):\n"
        "    import torch\n"
        "    settings = {**CONFIG, **overrides}\n"
        "    folders = [(settings['local_copy_dir'], overrides.get('cache_dir'))]\n"
        "    return torch.utils.data.DataLoader(folders, num_workers=0)\n"
    )
    spec = RunSpec(loader="exported", endpoint="http://127.0.0.1:1", bucket="b", prefix="p/",
                   keys=["k"], transform="decode", batch_size=1, num_workers=0, samples=1,
                   consumer_rate=None, export=str(export))  # fmt: skip
    try:
        folders = [_exported(spec).dataset[0] for _ in range(2)]
        export.write_text(export.read_text().replace("'cache_dir': '~/.cache/shared'", ""))
        uncached = _exported(spec).dataset[0]
    finally:
        for made in _CACHE_DIRS:
            shutil.rmtree(made, ignore_errors=True)
    copies, caches = {f[0] for f in folders}, {f[1] for f in folders}
    assert len(copies) == 2 and len(caches) == 2 and None not in caches
    assert uncached[1] is None
    assert not any(c.startswith("~") for c in copies)


def test_large_object_report_shows_one_process_against_the_best() -> None:
    from bench.e2e_large import MIB, report

    def row(n: int, rate: float) -> dict[str, object]:
        return {"latency_ms": 0, "size": 8 * MIB, "processes": n, "mb_per_s": rate,
                "first_byte_s": 0.01, "first_chunk_max_s": 0.02, "peak_rss_mb": 90.0}  # fmt: skip

    text = report([row(1, 90.0), row(1, 100.0), row(4, 100.0), row(4, 110.0)], (1, 4))
    assert "| 0 ms | 8 MiB | 1 | 95 (90-100) | 90% | 0.010 | 0.020 |" in text
    assert "| 0 ms | 8 MiB | 4 | 105 (100-110) |  |" in text


def test_lines_native_streams_text_shards_as_records(s3_endpoint, s3_bucket, tmp_path) -> None:  # type: ignore[no-untyped-def]
    client = s3_endpoint.boto3_client()
    keys = [f"shard-{i}.txt" for i in range(2)]
    for key in keys:
        client.put_object(Bucket=s3_bucket, Key=f"text/{key}", Body=b"a line\n" * 3000)
    export = tmp_path / "exported.py"
    export.write_text(
        "CONFIG = {'region': None, 'max_inflight_requests': 8, 'max_inflight_bytes': 2**26,\n"
        "          'loader': {'prefetch_factor': None}}\n"  # schema 7 nests the DataLoader's
    )
    spec = RunSpec(loader="lines-native", endpoint=s3_endpoint.url, bucket=s3_bucket,
                   prefix="text/", keys=keys, transform="lines", batch_size=512, num_workers=0,
                   samples=10**9, consumer_rate=None, export=str(export))  # fmt: skip
    result = run(spec)
    assert result.samples == 6000


def test_bars_judge_both_latencies_and_show_later_epochs_for_images_only() -> None:
    def row(scenario: str, loader: str, rates: list[float]) -> dict[str, object]:
        raw = [{"rep": i, "samples_per_s": r, "later_samples_per_s": 2 * r}
               for i, r in enumerate(rates)]  # fmt: skip
        return {"scenario": scenario, "loader": loader, "raw": raw}

    rows = [row("0ms jpeg fast", "exported", [260.0, 280.0]),
            row("0ms jpeg fast", "s3tc-map w2", [200.0, 200.0]),
            row("0ms jpeg fast", "exported-fill", [900.0, 900.0])]  # fmt: skip
    zero = next(b for b in bars(rows) if b.name.startswith("0 ms"))
    assert zero.against == "s3tc-map w2"  # the exported variants are not peers
    assert zero.ratio.median == pytest.approx(1.35) and zero.met
    later = bars(rows, "later_samples_per_s")
    assert not any("text" in b.name for b in later)
    assert next(b for b in later if b.name.startswith("0 ms")).ratio.median == pytest.approx(1.35)


def _nice(pid: int, thread: int) -> int:
    with open(f"/proc/{pid}/task/{thread}/stat") as f:
        stat = f.read()
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19, counted after the name


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc only")
def test_raise_priority_renices_every_thread_of_the_server() -> None:
    from bench.netem import PROXY_NICE, raise_priority

    sleeper = "threading.Thread(target=time.sleep, args=(30,)).start()\n"
    code = "import threading, time\n" + sleeper * 3
    code += "print('up', flush=True); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, PROXY_NICE)
        except PermissionError:
            pytest.skip("this user may not raise a priority")
        os.setpriority(os.PRIO_PROCESS, proc.pid, 0)  # back: the test is the function's
        raise_priority(proc.pid)
        threads = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        assert len(threads) == 4
        assert {t: _nice(proc.pid, t) for t in threads} == dict.fromkeys(threads, PROXY_NICE)
    finally:
        proc.kill()
        proc.communicate(timeout=10)

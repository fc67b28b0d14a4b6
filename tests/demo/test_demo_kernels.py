"""`%advisor --demo` in two real Jupyter kernels, one after another, as a user reopens a notebook:
the second kernel does not generate the data again (the cache's files are untouched), and once
both kernels have ended no demo data folder of theirs is left in their temp folder.

Speed is not asserted here: `python -m bench demo-start` measures the second start
(docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.demo_start import cache_snapshot, leftover_data_folders, start_demo_in_kernel

pytestmark = [
    pytest.mark.s3,  # each kernel starts its own SeaweedFS endpoint
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # jupyter_client/zmq internals
]


@pytest.mark.timeout(900)
def test_a_second_kernel_reuses_the_demo_data_and_no_folder_is_left(tmp_path: Path) -> None:
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()

    first = start_demo_in_kernel(cache, temp)
    assert first.seconds is not None, "the first kernel's demo never had its data"
    generated = cache_snapshot(cache)
    assert generated, "the first kernel kept no generated data in the cache"
    assert first.folder_gone, f"{first.data_folder} outlived the first kernel"

    second = start_demo_in_kernel(cache, temp)
    assert second.seconds is not None, "the second kernel's demo never had its data"
    assert cache_snapshot(cache) == generated  # read, not generated or rewritten
    assert second.data_folder != first.data_folder  # its own endpoint, its own folder
    assert second.folder_gone, f"{second.data_folder} outlived the second kernel"

    assert leftover_data_folders(temp) == []

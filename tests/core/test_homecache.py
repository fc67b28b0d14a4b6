"""The home cache (`python -m advisor cache`): a real copy-local copy made from SeaweedFS, a
streamed epochs' cache and the demo's data, listed with their sizes and what they are, and
removed by name; a name it does not hold and a copy a process is copying into are refused."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.cli import main
from advisor.core import homecache
from advisor.demo.server import S3Endpoint
from native_loader import ReaderConfig
from native_loader.loader import dataset_from_config
from native_loader.local_copy import LOCK, copy_to_local
from native_loader.settings import LoaderConfig, LoaderSettings


@pytest.fixture
def home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: S3Endpoint, s3_client: Any,
    s3_bucket: str,
) -> Iterator[Path]:  # fmt: skip
    """A home whose cache holds a copy of 12 objects of 50,000 bytes (copied from SeaweedFS),
    a streamed epochs' cache of 3,000 bytes and the demo's data (1,000 bytes) where
    LOADER_ADVISOR_DEMO_CACHE puts it, outside the home cache."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    demo = tmp_path / "elsewhere" / "demo"
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", str(demo))
    for i in range(12):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin", Body=bytes(50_000))
    root = tmp_path / "home" / ".cache" / "loader-advisor"
    config = ReaderConfig(endpoint_url=s3_endpoint.url)
    copy_to_local(f"s3://{s3_bucket}/data/", root / "aaaa1111" / "copy", config=config,
                  progress=None)  # fmt: skip
    (root / "bbbb2222").mkdir()
    (root / "bbbb2222" / "x.obj").write_bytes(bytes(3000))
    (demo / "v1-abc" / "small-images").mkdir(parents=True)
    (demo / "v1-abc" / "small-images" / "0.jpg").write_bytes(bytes(1000))
    yield root


def _cache(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["cache", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_listing_names_each_entry_its_size_and_what_it_is(
    home: Path, s3_bucket: str, s3_endpoint: S3Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cache(capsys)
    assert code == 0
    lines = out.splitlines()
    copy = next(line for line in lines if line.startswith("aaaa1111"))
    assert "586 KiB" in copy  # 600,000 bytes of data, and the copy's small records
    assert f"the copy-local copy of s3://{s3_bucket}/data/ on {s3_endpoint.url}" in copy
    assert "its last sync fetched 586 KiB in" in copy and "MiB/s" in copy
    streamed = next(line for line in lines if line.startswith("bbbb2222"))
    assert "2.9 KiB" in streamed and "cached by a streaming loader" in streamed
    demo = next(line for line in lines if line.startswith("demo"))
    assert "1,000 B" in demo and "the demo's generated data" in demo
    assert lines[0].startswith(f"{home}: ")
    assert s3_endpoint.credentials.secret_key not in out


def test_remove_frees_one_and_says_so(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cache(capsys, "--remove", "aaaa1111", "--json")
    assert code == 0
    result = json.loads(out)
    assert [e["name"] for e in result["removed"]] == ["aaaa1111"]
    assert result["removed"][0]["bytes"] > 600_000
    assert sorted(e["name"] for e in result["entries"]) == ["bbbb2222", "demo"]
    assert not (home / "aaaa1111").exists() and (home / "bbbb2222").exists()
    code, out, _ = _cache(capsys, "--remove", "demo")
    assert code == 0 and out.startswith("removed demo (1,000 B)")
    assert not Path(os.environ["LOADER_ADVISOR_DEMO_CACHE"]).exists()


def test_a_name_it_does_not_hold_is_refused_naming_what_it_holds(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cache(capsys, "--remove", "nope")
    assert code == 2 and out == ""
    assert err.strip() == (
        "error: the home cache holds no 'nope' (it holds: aaaa1111, bbbb2222, demo)"
    )
    assert (home / "aaaa1111").exists()


def test_a_copy_being_made_is_kept(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A process holding the copy's lock (copying into it) keeps it: --remove refuses and
    names the process, --remove-all removes the rest and says what it kept."""
    fd = os.open(home / "aaaa1111" / "copy" / LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b"4242\n", 0)
        listed = {e.name: e for e in homecache.entries()}
        assert listed["aaaa1111"].busy == "4242"
        code, _, err = _cache(capsys, "--remove", "aaaa1111")
        assert code == 2 and "process 4242 is copying into" in err
        code, out, err = _cache(capsys, "--remove-all")
        assert code == 0 and "kept aaaa1111: process 4242 is copying into it" in err
        assert (home / "aaaa1111").exists() and not (home / "bbbb2222").exists()
        assert "removed demo" in out
    finally:
        os.close(fd)


def test_a_saved_listing_is_listed_and_removed(
    home: Path, s3_bucket: str, s3_endpoint: S3Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    """The listing an exported loader saved by default (`dataset_from_config`, no cache_dir) is
    an entry of its own: what it lists, on which endpoint, its objects and age; --remove
    removes it and the next loader lists again."""
    config = LoaderConfig(
        uri=f"s3://{s3_bucket}/data/", endpoint_url=s3_endpoint.url, region=s3_endpoint.region,
        profile=None, tar_samples=False, data_format="binary", transform=None,
        loader=LoaderSettings(batch_size=4), shuffle=True, seed=0, data_source="stream",
        sagemaker_input_mode=None, shard_size_bytes=None, max_inflight_requests=8,
        max_inflight_bytes=64 * 2**20, cache_dir=None, cache_max_bytes=None,
    )  # fmt: skip
    dataset = dataset_from_config(config)
    assert dataset.listing is not None and dataset.listing.path is not None
    saved = Path(dataset.listing.path)
    name = saved.name[:14]
    code, out, _ = _cache(capsys)
    line = next(line for line in out.splitlines() if line.startswith(name))
    assert saved.parent == home / "listings" and name.startswith("listing-")
    assert f"the saved listing of s3://{s3_bucket}/data/ on {s3_endpoint.url}: 12 objects" in line
    assert " ago (exported loaders load it instead of listing again" in line
    assert s3_endpoint.credentials.secret_key not in out
    code, out, _ = _cache(capsys, "--remove", name, "--json")
    assert code == 0 and [e["name"] for e in json.loads(out)["removed"]] == [name]
    assert not saved.exists()
    assert name not in [e.name for e in homecache.entries()]
    again = dataset_from_config(config)
    assert again.listing is not None and again.listing.origin == "listed"


def test_the_summary_gives_the_total_and_the_command(home: Path) -> None:
    line = homecache.summary()
    held = sum(e.bytes for e in homecache.entries())
    assert held > 600_000
    assert line.startswith("the home cache ~/.cache/loader-advisor holds ")
    assert "in 3 folders (`python -m advisor cache` lists them" in line


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ipywidgets.*")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:comm.*")
def test_the_wizard_says_what_the_demo_added_to_the_cache(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where starting the demo keeps data for the next kernel (a first start), the wizard's
    status says how much, and what the home cache holds; a start that keeps nothing says
    nothing of it. The keeping is the demo's (tested in test_demo_store.py): here the session's
    use_demo writes the kept file itself, on the small demo already served."""
    from advisor.demo import stop_demo
    from advisor.session import AdvisorSession
    from advisor.wizard.controller import WizardController
    from tests.browser.browser_helpers import small_demo_env

    for name, value in small_demo_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    demo = tmp_path / "demo-cache"
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", str(demo))
    original = AdvisorSession.use_demo

    def keeping(self: AdvisorSession, *args: Any, **kwargs: Any) -> str:
        uri = original(self, *args, **kwargs)
        kept = demo / "v1-abc" / "small-images" / "0.jpg"
        if not kept.exists():  # a first start keeps the data; a later one finds it
            kept.parent.mkdir(parents=True)
            kept.write_bytes(bytes(5000))
        return uri

    monkeypatch.setattr(AdvisorSession, "use_demo", keeping)
    stop_demo()
    c = WizardController(AdvisorSession())
    try:
        assert c.use_demo("small-images") and c.wait(60), c.errors
        assert c.message.startswith("profile done; the demo kept 4.9 KiB: the home cache "), (
            c.message
        )
        assert "holds 4.9 KiB in 1 folder (`python -m advisor cache` lists them" in c.message
        assert c.use_demo("small-images") and c.wait(60), c.errors
        assert c.message == "profile done"
    finally:
        c.close()
        stop_demo()


def test_a_link_in_the_cache_is_removed_not_what_it_points_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LOADER_ADVISOR_DEMO_CACHE", str(tmp_path / "no-demo"))
    elsewhere = tmp_path / "scratch-nvme"
    elsewhere.mkdir()
    (elsewhere / "keep.bin").write_bytes(bytes(100))
    root = tmp_path / "home" / ".cache" / "loader-advisor"
    root.mkdir(parents=True)
    (root / "linked").symlink_to(elsewhere)
    code, out, _ = _cache(capsys, "--remove", "linked")
    assert code == 0 and out.startswith("removed linked")
    assert not (root / "linked").exists() and (elsewhere / "keep.bin").exists()

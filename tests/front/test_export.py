"""The exported DataLoader module: runnable, yields batches from the endpoint, holds no secret."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from advisor.core.workload import Workload
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.export import build_export
from advisor.session import AdvisorSession
from native_loader.sample_errors import SamplePolicy
from tests.export_helpers import advised_session, import_exported, run_exported

SPEC = DemoSpec(images=24, image_kb=(10, 20), classes=2, shard_mb=0.1, large_files=1, large_mb=1)


@pytest.fixture
def session(s3_endpoint: S3Endpoint, s3_bucket: str) -> AdvisorSession:
    upload(s3_endpoint, s3_bucket, SPEC)
    return advised_session(
        f"s3://{s3_bucket}/shards/", Workload(batch_size=4, epochs=2), endpoint_url=s3_endpoint.url
    )


def test_module_and_json_hold_no_credentials(session: AdvisorSession, tmp_path: Path) -> None:
    module, data = session.save_export(tmp_path, "loader_cfg")
    text = module.read_text() + data.read_text()
    for secret in (os.environ["AWS_SECRET_ACCESS_KEY"], os.environ["AWS_ACCESS_KEY_ID"]):
        assert secret not in text
    config = json.loads(data.read_text())
    assert config["uri"] == session.location.uri  # type: ignore[union-attr]
    assert config["tar_samples"] is True and config["data_format"] == "tar"
    assert config["loader"]["num_workers"] == session.recommendation.num_workers  # type: ignore[union-attr]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_module_run_as_a_script_counts_the_samples_it_read(
    session: AdvisorSession, tmp_path: Path, workers: int
) -> None:
    """`python <module>.py` reads 3 batches of 4 and prints the loader's stats, which count
    them: exactly, in this process; with workers, with what they read ahead (the samples of
    their shards, at most every image)."""
    assert session.recommendation is not None and session.location is not None
    rec = dataclasses.replace(session.recommendation, num_workers=workers)
    bundle = build_export(session.location, rec, session.workload, session.profile)
    module, _ = bundle.save(tmp_path, "script_cfg")
    ran = run_exported(module, home=tmp_path)
    assert ran.returncode == 0, ran.stderr
    read, stats = ran.stdout.splitlines()
    assert re.fullmatch(r"read 3 batches in \d+\.\d\d s", read), read
    seen = ast.literal_eval(stats)
    assert seen["samples_skipped"] == 0, stats
    if workers == 0:
        assert seen["samples_seen"] == 3 * 4, stats
    else:
        assert 3 * 4 <= seen["samples_seen"] <= SPEC.images, stats


def test_exported_module_yields_batches(session: AdvisorSession, tmp_path: Path) -> None:
    session.save_export(tmp_path, "loader_cfg")
    code = (
        "import sys\n"
        "sys.modules['advisor'] = None  # training needs only native_loader and torch\n"
        "import loader_cfg, torch\n"
        "batches = list(loader_cfg.make_dataloader())\n"
        "samples = [s for b in batches for s in b]\n"
        "assert all(isinstance(s['jpg'], torch.Tensor) and s['jpg'].ndim == 3 for s in samples)\n"
        "half = [s for b in loader_cfg.make_dataloader(rank=1, world_size=2) for s in b]\n"
        "print(len(samples), len(half))\n"
    )
    result = run_exported(tmp_path / "loader_cfg.py", code=code, home=tmp_path)
    assert result.returncode == 0, result.stderr
    total, half = map(int, result.stdout.split())
    assert total == SPEC.images
    assert 0 < half < total
    main = run_exported(tmp_path / "loader_cfg.py", home=tmp_path)
    assert main.returncode == 0, main.stderr
    assert "read" in main.stdout and "batches" in main.stdout


def test_copy_local_exports_a_resumable_prepare_step(
    session: AdvisorSession, tmp_path: Path
) -> None:
    """A copy-local recommendation for S3 data exports the copy: prepare() makes it (size and
    ETag recorded), a second run keeps every object, and the loader reads the local files."""
    assert session.recommendation is not None
    assert session.recommendation.data_source == "copy-local"
    module, _ = session.save_export(tmp_path, "copy_cfg")
    text = module.read_text()
    assert "A batch is a list of `batch_size` samples" in text
    assert "Every epoch reads a local copy" in text
    code = (
        "import copy_cfg\n"
        "print(copy_cfg.prepare(progress=print))\n"
        "print(copy_cfg.prepare(progress=print))\n"
        "batches = list(copy_cfg.make_dataloader(num_workers=0))\n"
        "print('samples', sum(len(b) for b in batches))\n"
    )
    result = run_exported(module, code=code, home=tmp_path)
    assert result.returncode == 0, result.stderr
    count = session.profile.object_count  # type: ignore[union-attr]
    assert f"copying {count} of {count} objects" in result.stdout
    assert f"copying 0 of {count} objects" in result.stdout  # resumed: every object kept
    copy_dir = Path(result.stdout.splitlines()[-2])
    manifest = json.loads((copy_dir / "_manifest.json").read_text())
    assert len(manifest) == count and all(len(v) == 2 and v[1] for v in manifest.values())
    assert f"samples {SPEC.images}" in result.stdout
    # `python copy_cfg.py --prepare` names the copy, its size and its last fetch, measured
    prepared = run_exported(module, "--prepare", home=tmp_path)
    assert prepared.returncode == 0, prepared.stderr
    line = prepared.stdout.strip().splitlines()[-1]
    assert line.startswith(f"{copy_dir}: {count} objects, "), line
    assert "; its last copy fetched " in line and " MiB/s)" in line, line
    assert ", already local (nothing fetched now);" in line, line  # not "copied 0.0 MiB"


def test_copy_local_overrides_reach_the_copy(session: AdvisorSession, tmp_path: Path) -> None:
    """make_dataloader(local_copy_dir=...) copies into that folder and reads it, as the other
    keyword overrides win over CONFIG: the copy is not made in (or read from) the exported
    folder while the dataset reads an empty one."""
    session.save_export(tmp_path, "override_cfg")
    code = (
        "import os, override_cfg\n"
        "target = os.path.join(os.getcwd(), 'my-copy')\n"
        "batches = list(override_cfg.make_dataloader(num_workers=0, local_copy_dir=target))\n"
        "print('samples', sum(len(b) for b in batches))\n"
        "default = os.path.expanduser(override_cfg.CONFIG['local_copy_dir'])\n"
        "print('default', os.path.exists(default))\n"
    )
    result = run_exported(tmp_path / "override_cfg.py", code=code, home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"samples {SPEC.images}" in result.stdout
    assert "default False" in result.stdout
    manifest = json.loads((tmp_path / "my-copy" / "_manifest.json").read_text())
    assert len(manifest) == session.profile.object_count  # type: ignore[union-attr]


def test_the_loader_is_built_one_way(
    session: AdvisorSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial's sweep, Recommendation.dataloader_kwargs() and the exported module build the
    same DataLoader (native_loader.loader): workers, prefetch, persistence, pinning, batching,
    collation and the reader's settings."""
    from advisor.measure.trial.data import TrialData
    from advisor.measure.trial.live import LiveLoader
    from native_loader.decoders import default_decoder
    from native_loader.loader import _WidePipes

    assert session.recommendation is not None and session.location is not None
    rec = dataclasses.replace(
        session.recommendation, num_workers=2, prefetch_factor=5, pin_memory=False,
        requests_in_flight=48, inflight_bytes=300 * 2**20,
    )  # fmt: skip
    bundle = build_export(session.location, rec, session.workload, session.profile)
    bundle.save(tmp_path, "one_way_cfg")
    monkeypatch.setenv("HOME", str(tmp_path))
    exported = import_exported(tmp_path / "one_way_cfg.py").make_dataloader()

    data = TrialData.sample(session.location, "tar", default_decoder("tar"))
    data = data.with_inflight(rec.requests_in_flight, rec.inflight_bytes)
    live = LiveLoader(data, session.workload.batch_size, 2, False, prefetch=rec.prefetch_factor)
    kwargs = rec.dataloader_kwargs()
    try:
        for loader in (exported, live.loader):
            assert loader.num_workers == kwargs["num_workers"] == 2
            assert loader.prefetch_factor == kwargs["prefetch_factor"] == 5
            assert loader.persistent_workers is kwargs["persistent_workers"] is True
            assert loader.pin_memory is kwargs["pin_memory"] is False
            assert loader.batch_size == session.workload.batch_size
            assert loader.collate_fn is exported.collate_fn
            # batches cross from the workers the same way (the trial names "fork")
            assert isinstance(loader.multiprocessing_context, _WidePipes)
        reader_configs = [exported.dataset.config, live.loader.dataset.dataset.config]
        for config in reader_configs:
            assert config.max_inflight_requests == 48
            assert config.max_inflight_bytes == 300 * 2**20
    finally:
        live.close()


def test_multi_epoch_stream_exports_a_cache(session: AdvisorSession, tmp_path: Path) -> None:
    assert session.recommendation is not None and session.location is not None
    streaming = dataclasses.replace(
        session.recommendation, data_source="stream", cache_locally=True
    )
    bundle = build_export(session.location, streaming, session.workload, session.profile)
    assert bundle.config.cache_dir is not None and bundle.config.cache_dir.startswith("~")
    bundle.save(tmp_path, "cached_cfg")
    code = "import cached_cfg\nlist(cached_cfg.make_dataloader())\n"
    result = run_exported(tmp_path / "cached_cfg.py", code=code, home=tmp_path)
    assert result.returncode == 0, result.stderr
    cache_files = list((tmp_path / ".cache" / "loader-advisor").rglob("*.obj"))
    assert len(cache_files) == session.profile.object_count  # type: ignore[union-attr]
    # its listing is saved in the home cache, beside the cache, for later runs and ranks
    assert bundle.config.index_dir == "~/.cache/loader-advisor/listings"
    assert json.loads(bundle.json_text)["index_max_age_s"] == 24 * 3600
    assert "Its listing is saved in ~/.cache/loader-advisor/listings" in " ".join(
        bundle.module_source.split()
    )
    saved = list((tmp_path / ".cache" / "loader-advisor" / "listings").glob("listing-*.index"))
    assert len(saved) == 1


def test_recommended_reader_settings_reach_the_reader(
    session: AdvisorSession, tmp_path: Path
) -> None:
    assert session.recommendation is not None and session.location is not None
    tuned = dataclasses.replace(
        session.recommendation, requests_in_flight=77, inflight_bytes=768 * 2**20
    )
    bundle = build_export(session.location, tuned, session.workload, session.profile)
    exported = json.loads(bundle.json_text)
    assert exported["max_inflight_requests"] == 77
    assert exported["max_inflight_bytes"] == 768 * 2**20
    bundle.save(tmp_path, "tuned_cfg")
    code = (
        "import tuned_cfg\nloader = tuned_cfg.make_dataloader()\nconfig = loader.dataset.config\n"
    )
    code += "print(config.max_inflight_requests, config.max_inflight_bytes)\n"
    result = run_exported(tmp_path / "tuned_cfg.py", code=code, home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["77", str(768 * 2**20)]


def test_sagemaker_snippet_and_bad_name(session: AdvisorSession, tmp_path: Path) -> None:
    bundle = session.export()
    mode = session.recommendation.sagemaker_input_mode  # type: ignore[union-attr]
    if mode in ("File", "FastFile", "Pipe"):
        assert bundle.sagemaker_snippet is not None and f"input_mode={mode!r}" in (
            bundle.sagemaker_snippet
        )
    with pytest.raises(ValueError, match="module name"):
        bundle.save(tmp_path, "not-a-module")
    with pytest.raises(ValueError, match="not a Python keyword"):
        bundle.save(tmp_path, "class")
    assert not list(tmp_path.glob("class.*"))


def test_the_failure_policy_is_exported_and_counts_in_the_loader_stats(
    s3_endpoint: S3Endpoint, s3_bucket: str, s3_client: object, tmp_path: Path
) -> None:
    """One corrupt JPEG among the images: the default loader raises naming it; exported with
    on_error="skip" it is left out and counted in loader_stats()."""
    upload(s3_endpoint, s3_bucket, SPEC)
    corrupt = "small-images/class_0/corrupt.jpg"
    s3_client.put_object(Bucket=s3_bucket, Key=corrupt, Body=b"no jpeg")  # type: ignore[attr-defined]
    session = advised_session(
        f"s3://{s3_bucket}/small-images/", Workload(batch_size=4), endpoint_url=s3_endpoint.url
    )
    assert session.recommendation is not None and session.location is not None
    args = (session.location, session.recommendation, session.workload, session.profile)
    build_export(*args).save(tmp_path, "strict_cfg")
    assert json.loads((tmp_path / "strict_cfg.json").read_text())["on_error"] == "raise"
    code = "import strict_cfg\nlist(strict_cfg.make_dataloader(num_workers=0))\n"
    strict = run_exported(tmp_path / "strict_cfg.py", code=code, home=tmp_path)
    assert strict.returncode != 0
    # a copy-local export reads its local copy: the error names the copied file
    assert (
        f"SampleError: the default decoder (decode_image) failed on {tmp_path}/.cache/"
    ) in strict.stderr
    assert f"/copy/{corrupt.split('/', 1)[1]}: UnidentifiedImageError" in strict.stderr
    bundle = build_export(*args, on_error=SamplePolicy("skip", max_skipped_share=0.1))
    assert json.loads(bundle.json_text)["on_error"] == "skip"
    bundle.save(tmp_path, "skip_cfg")
    code = (
        "import skip_cfg\nloader = skip_cfg.make_dataloader(num_workers=2)\n"
        "print(sum(len(batch) for batch in loader), skip_cfg.loader_stats(loader))\n"
    )
    result = run_exported(tmp_path / "skip_cfg.py", code=code, home=tmp_path)
    assert result.returncode == 0, result.stderr
    images = SPEC.images
    assert result.stdout.strip() == (
        f"{images} {{'samples_seen': {images + 1}, 'samples_skipped': 1, "
        "'throttled': 0, 'rate_cuts': 0, 'rate_limited_ms': 0, 'retries': 0}"
    )

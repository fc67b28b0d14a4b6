"""The exported module is data plus one call (issue 42): `native_loader.loader.from_config` builds
the loader a CONFIG describes and refuses, naming it, what it does not understand; a module an
export writes is its CONFIG, its rationale and usage text, and a thin face under 80 lines of code
that runs with only the runtime; a module exported before (schema version 6, its own code in
it) still runs on this runtime. All on a local folder: no endpoint needed."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import shutil
import tokenize
from pathlib import Path
from typing import Any

import pytest

from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import recommend
from advisor.demo.datasets import DemoSpec, write_folder
from advisor.export import build_export
from native_loader.loader import dataset_from_config, from_config, prepare_from_config
from native_loader.settings import SCHEMA_VERSION, LoaderConfig, LoaderSettings
from tests.builders import hardware as _hardware
from tests.builders import s3_profile
from tests.export_helpers import advised_session, run_exported

SPEC = DemoSpec(images=12, image_kb=(5, 10), classes=2, shard_mb=0.1, large_files=0)
ROOT = Path(__file__).resolve().parents[2]
EXPORTS = ROOT / "tests" / "front" / "exports"  # modules written by earlier versions
CODE_LINES = 80  # a generated module's lines of code, its CONFIG and comments not counted


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SPEC's small images as files: class_N/NNNN.jpg."""
    root = tmp_path_factory.mktemp("data")
    return Path(write_folder(root, SPEC)["small-images"])


def _config(uri: str, **changes: Any) -> LoaderConfig:
    config = LoaderConfig(
        uri=uri, endpoint_url=None, region=None, profile=None, tar_samples=False,
        data_format="jpeg", transform=None,
        loader=LoaderSettings(batch_size=4, num_workers=2, pin_memory=False, prefetch_factor=3),
        shuffle=True, seed=0, data_source="stream", sagemaker_input_mode=None,
        shard_size_bytes=None, max_inflight_requests=7, max_inflight_bytes=64 * 2**20,
        cache_dir=None, cache_max_bytes=None,
    )  # fmt: skip
    return dataclasses.replace(config, **changes)


def test_a_config_is_json_and_reads_back_as_itself() -> None:
    config = _config("s3://bucket/train/", records="jsonl", on_error="skip")
    data = json.loads(json.dumps(config.to_dict()))
    assert data["loader"] == {
        "batch_size": 4, "num_workers": 2, "pin_memory": False, "prefetch_factor": 3
    }  # fmt: skip
    assert data["schema_version"] == SCHEMA_VERSION
    assert LoaderConfig.from_dict(data) == config


def test_the_listing_settings_read_back_and_a_config_of_7_takes_their_defaults() -> None:
    """index_dir and index_max_age_s (schema 8) round-trip; a config of schema 7, a thin module
    exported before them, is read with the listing saved in the home cache for 24 h; a
    negative age is refused, naming it."""
    config = _config("s3://bucket/train/", index_dir="/scratch/listings", index_max_age_s=600.0)
    data = json.loads(json.dumps(config.to_dict()))
    assert (data["index_dir"], data["index_max_age_s"]) == ("/scratch/listings", 600.0)
    assert LoaderConfig.from_dict(data) == config
    off = _config("s3://bucket/train/", index_dir=None)
    assert LoaderConfig.from_dict(json.loads(json.dumps(off.to_dict()))) == off
    seven = {k: v for k, v in data.items() if not k.startswith("index_")}
    read = LoaderConfig.from_dict({**seven, "schema_version": 7})
    assert read.index_dir == "~/.cache/loader-advisor/listings"
    assert (read.index_max_age_s, read.schema_version) == (24 * 3600.0, SCHEMA_VERSION)
    with pytest.raises(ValueError, match=r"index_max_age_s=-1 must be a number of seconds"):
        LoaderConfig.from_dict({**data, "index_max_age_s": -1})


def _legacy_json() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXPORTS / "loader_schema6.json").read_text())
    return data


def _current(**changes: Any) -> dict[str, Any]:
    data = _config("/data/train/").to_dict()
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (_legacy_json(), r"schema version 6, from an earlier Loader Advisor.*export it again"),
        (_current(schema_version=SCHEMA_VERSION + 1), r"from a later .*pip install -U"),
        (_current(schema_version=None), r"not a Loader Advisor loader config"),
        (_current(num_wrokers=2), r"does not understand .*: unknown settings num_wrokers$"),
        (
            _current(loader={"batch_size": 4, "drop_last": True}),
            r"unknown settings loader\.drop_last",
        ),
        (_current(uri=None, seed=None), r"missing settings seed, uri$"),
        (_current(loader=None), r"'loader' must be a mapping"),
    ],
    ids=["earlier", "later", "no-version", "unknown", "unknown-nested", "missing", "flat"],
)
def test_a_config_it_does_not_understand_is_named(data: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        from_config(data)


def test_from_config_builds_the_configured_loader_and_overrides_win(folder: Path) -> None:
    """The config's DataLoader and reader settings reach the loader; overrides reach the
    loader (batch_size, num_workers), the dataset (a transform callable, shuffle) or the
    DataLoader itself (drop_last)."""
    config = _config(str(folder)).to_dict()
    loader = from_config(config)
    assert (loader.batch_size, loader.num_workers, loader.prefetch_factor) == (4, 2, 3)
    assert loader.persistent_workers is True and loader.pin_memory is False
    assert loader.dataset.config.max_inflight_requests == 7
    assert loader.dataset.config.max_inflight_bytes == 64 * 2**20

    sized = from_config(
        config, num_workers=0, batch_size=5, transform=len, shuffle=False, drop_last=True
    )
    assert (sized.batch_size, sized.num_workers, sized.drop_last) == (5, 0, True)
    sizes = [size for batch in sized for size in batch]
    files = sorted(folder.rglob("*.jpg"))
    assert len(sizes) == 10  # 12 samples in batches of 5, the last one dropped
    assert sizes == [p.stat().st_size for p in files][:10]  # in order, each its file's size
    assert config == _config(str(folder)).to_dict()  # the caller's CONFIG is left as it was


def test_a_misspelt_setting_is_named_not_ignored(folder: Path) -> None:
    """A dataset setting the config does not have was silently ignored by the modules of
    schema 6 (`make_dataset(shufle=False)` shuffled); now it is a TypeError naming it. The
    DataLoader's own settings are accepted where only the dataset is made."""
    config = _config(str(folder)).to_dict()
    with pytest.raises(TypeError, match=r"unknown settings shufle: the dataset takes .*shuffle"):
        dataset_from_config(config, shufle=False)
    with pytest.raises(TypeError, match=r"unknown settings locl_copy_dir"):
        prepare_from_config(config, locl_copy_dir="/tmp/x")
    assert len(dataset_from_config(config, num_workers=0).uris()) == SPEC.images
    assert prepare_from_config(config) is None  # no local copy: it reads in place


def _variants() -> dict[str, str]:
    """Generated modules with the longest texts: copy-local, a cache, tar samples, records,
    the demo's data, both SageMaker inputs."""
    location = DatasetLocation("s3://bucket/train/", endpoint_url="http://127.0.0.1:9000")
    workload = Workload(batch_size=32, epochs=3)
    modules = {}
    for name, fmt, records in (("jpeg", "jpeg", None), ("tar", "tar", None), ("csv", "csv", "csv")):
        profile = s3_profile(20_000, 150_000_000 if fmt == "tar" else 50_000, fmt, records)
        rec = recommend(profile, _hardware(), workload)
        for source, cache, mode in (
            ("copy-local", False, "File"), ("stream", True, "FSxLustre"), ("stream", False, None)
        ):  # fmt: skip
            rec = dataclasses.replace(
                rec, data_source=source, cache_locally=cache, sagemaker_input_mode=mode
            )
            bundle = build_export(location, rec, workload, profile, demo=source == "stream")
            modules[f"{name}-{source}-{cache}-{mode}"] = bundle.module_source
    return modules


def _config_node(tree: ast.Module) -> ast.AnnAssign:
    (config,) = [
        node
        for node in tree.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "CONFIG"
    ]
    return config


def code_lines(source: str) -> int:
    """Lines holding code (docstrings included), not counting the CONFIG assignment, comments
    and blank lines."""
    config = _config_node(ast.parse(source))
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip and token.type != tokenize.ENDMARKER:
            lines.update(range(token.start[0], token.end[0] + 1))
    assert config.end_lineno is not None
    return len(lines - set(range(config.lineno, config.end_lineno + 1)))


def test_a_generated_module_is_data_plus_a_thin_face() -> None:
    """Every variant is under CODE_LINES lines of code besides its CONFIG; its CONFIG is the
    config (JSON-able, the JSON's content); it imports the runtime and nothing else."""
    modules = _variants()
    counts = {name: code_lines(source) for name, source in modules.items()}
    assert max(counts.values()) < CODE_LINES, counts
    assert min(counts.values()) > 30, counts  # the counter counts: a face and its docstrings
    for source in modules.values():
        tree = ast.parse(source)
        imported = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        assert imported == {"__future__", "sys", "typing", "native_loader.loader",
                            "native_loader.exported"}  # fmt: skip
        data = ast.literal_eval(_config_node(tree).value)  # type: ignore[arg-type]
        assert json.loads(json.dumps(data)) == data
        assert LoaderConfig.from_dict(data).to_dict() == data


RUN_FACE = """
import sys
sys.modules["advisor"] = None  # training needs only native_loader and torch
import {stem}, torch
samples = [s for b in {stem}.make_dataloader(num_workers=0) for s in b]
assert all(isinstance(s, torch.Tensor) and s.ndim == 3 for s in samples)
print(len(samples), len(list({stem}.make_dataset())), {stem}.prepare())
print({stem}.loader_stats({stem}.make_dataloader(num_workers=0)))
"""


@pytest.mark.slow
def test_a_generated_module_runs_with_only_the_runtime(folder: Path, tmp_path: Path) -> None:
    """make_dataloader, make_dataset, prepare and loader_stats with `advisor` unimportable;
    `python module.py` reads 3 batches, and with a corrupt sample says so in one line."""
    data = shutil.copytree(folder, tmp_path / "data")
    session = advised_session(str(data), Workload(batch_size=4))
    module, _ = session.save_export(tmp_path, "face_cfg")
    result = run_exported(module, code=RUN_FACE.format(stem="face_cfg"), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{SPEC.images} {SPEC.images} None"
    assert "'samples_seen': 0" in result.stdout

    ran = run_exported(module, home=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "read 3 batches in" in ran.stdout and "'samples_seen'" in ran.stdout
    corrupt = sorted(data.rglob("*.jpg"))[0]
    corrupt.write_bytes(b"no jpeg")  # the 3 batches of 4 read every sample
    failed = run_exported(module, home=tmp_path)
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1, failed.stderr
    assert failed.stderr.startswith("error: SampleError: ") and corrupt.name in failed.stderr


RUN_LEGACY = """
import sys
sys.modules["advisor"] = None
import loader_schema6, torch
assert loader_schema6.CONFIG["schema_version"] == 6 and "batch_size" in loader_schema6.CONFIG
loader = loader_schema6.make_dataloader(num_workers=0, uri=sys.argv[1])
samples = [s for b in loader for s in b]
assert all(isinstance(s, torch.Tensor) and s.ndim == 3 for s in samples)
print(len(samples), loader.batch_size, loader_schema6.loader_stats(loader)["samples_seen"])
from native_loader.loader import from_config
try:
    from_config(loader_schema6.CONFIG)
except ValueError as exc:
    print(exc)
"""


def test_a_module_exported_before_still_runs(folder: Path, tmp_path: Path) -> None:
    """A module the schema-6 template wrote (tests/front/exports, its own loader code in it) runs on
    this runtime with only the runtime; its CONFIG given to from_config is refused with a line
    that says to export again."""
    shutil.copy(EXPORTS / "loader_schema6.py.txt", tmp_path / "loader_schema6.py")
    module = tmp_path / "loader_schema6.py"
    result = run_exported(module, str(folder), code=RUN_LEGACY, home=tmp_path)
    assert result.returncode == 0, result.stderr
    first, said = result.stdout.splitlines()
    assert first == f"{SPEC.images} 4 {SPEC.images}"
    assert "schema version 6, from an earlier Loader Advisor" in said
    assert "export it again" in said

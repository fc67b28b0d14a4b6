"""Export a recommendation as a runnable Python module and JSON. Never with credentials.

The module only stores where the data is and how to load it; at run time `native_loader`
resolves credentials from the standard AWS chain (environment, profile, SSO, web identity,
instance or container role), so the file can be committed and shared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pprint
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.core.bounds import check_module_name
from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from native_loader.cache import DEFAULT_CACHE_BYTES
from native_loader.sample_errors import SamplePolicy
from native_loader.uri import uri_scheme

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation
    from advisor.measure.profile import DatasetProfile

SCHEMA_VERSION = 3  # 2: max_inflight_bytes; 3: on_error, max_skipped_share
CACHE_ROOT = "~/.cache/loader-advisor"  # local disk; point it at NVMe scratch where there is one


@dataclass(frozen=True)
class LoaderConfig:
    """Everything `make_dataloader` needs, as plain data (JSON is built from dataclasses.asdict)."""

    uri: str
    endpoint_url: str | None
    region: str | None
    profile: str | None
    tar_samples: bool  # iterate WebDataset tar shards as samples
    data_format: str
    transform: str | None  # "module:callable"; None = the default decoder for data_format
    batch_size: int
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    shuffle: bool
    seed: int
    data_source: str
    sagemaker_input_mode: str | None
    shard_size_bytes: int | None
    max_inflight_requests: int
    max_inflight_bytes: int
    cache_dir: str | None  # local copy after the first epoch (multi-epoch streaming); None = off
    cache_max_bytes: int | None
    # samples mixed in each worker on top of the per-epoch shard order (tar shards; 0 = off)
    shuffle_buffer: int = 0
    # a sample that fails to read or decode: "raise" naming the object, or "skip" and count it
    # until more than max_skipped_share of the samples seen failed (native_loader.sample_errors)
    on_error: str = "raise"
    max_skipped_share: float = 0.01
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class ExportBundle:
    config: LoaderConfig
    module_source: str
    json_text: str
    sagemaker_snippet: str | None

    def save(self, directory: Path, stem: str = "dataloader_config") -> tuple[Path, Path]:
        """Write `<stem>.py` and `<stem>.json`; refuses names no one could import."""
        check_module_name(stem)
        directory.mkdir(parents=True, exist_ok=True)
        module_path = directory / f"{stem}.py"
        json_path = directory / f"{stem}.json"
        module_path.write_text(self.module_source)
        json_path.write_text(self.json_text)
        return module_path, json_path


def build_export(
    location: DatasetLocation,
    recommendation: Recommendation,
    workload: Workload,
    profile: DatasetProfile | None = None,
    on_error: SamplePolicy | None = None,
) -> ExportBundle:
    """The module and JSON for `recommendation`; `on_error` is what the loader does with a
    sample that fails (default: raise naming the object)."""
    policy = on_error if on_error is not None else SamplePolicy()
    fmt = recommendation.data_format or "binary"
    cache_dir = cache_max = None
    if recommendation.cache_locally:
        digest = hashlib.sha256(location.uri.encode()).hexdigest()[:12]
        cache_dir = f"{CACHE_ROOT}/{digest}"
        total = profile.total_bytes if profile else DEFAULT_CACHE_BYTES
        cache_max = min(DEFAULT_CACHE_BYTES, int(total * 1.1) + 2**20)
    config = LoaderConfig(
        uri=location.uri,
        endpoint_url=location.endpoint_url,
        region=location.region,
        profile=location.profile,
        tar_samples=fmt == "tar",
        data_format=fmt,
        transform=workload.transform,
        batch_size=workload.batch_size,
        num_workers=recommendation.num_workers,
        pin_memory=recommendation.pin_memory,
        prefetch_factor=recommendation.prefetch_factor,
        shuffle=True,
        seed=0,
        data_source=recommendation.data_source,
        sagemaker_input_mode=recommendation.sagemaker_input_mode,
        shard_size_bytes=recommendation.shard_size_bytes,
        max_inflight_requests=recommendation.requests_in_flight,
        max_inflight_bytes=recommendation.inflight_bytes,
        cache_dir=cache_dir,
        cache_max_bytes=cache_max,
        shuffle_buffer=shuffle_buffer(profile) if fmt == "tar" else 0,
        on_error=policy.on_error,
        max_skipped_share=policy.max_skipped_share,
    )
    data = dataclasses.asdict(config)
    json_text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    snippet = sagemaker_snippet(config)
    return ExportBundle(config, render_module(config, recommendation, snippet), json_text, snippet)


SHUFFLE_BUFFER_BYTES = 64 * 2**20  # per DataLoader worker


def shuffle_buffer(profile: DatasetProfile | None) -> int:
    """Samples in each worker's shuffle buffer for tar shards: the shard order is shuffled per
    epoch, and the buffer mixes samples across the shards a worker reads, up to about
    SHUFFLE_BUFFER_BYTES of samples (100 to 5,000; 1,000 when the sample size is unknown)."""
    tar = next((f for f in profile.formats if f.name == "tar"), None) if profile else None
    if tar is None or not tar.samples_per_object or not tar.objects:
        return 1000
    sample_bytes = tar.bytes / tar.objects / tar.samples_per_object
    return int(min(5000, max(100, SHUFFLE_BUFFER_BYTES // max(sample_bytes, 1))))


def sagemaker_snippet(config: LoaderConfig) -> str | None:
    """A SageMaker input for the recommended data source, where one applies."""
    mode = config.sagemaker_input_mode
    if not mode or uri_scheme(config.uri) != "s3":
        return None
    if mode in ("File", "FastFile", "Pipe"):
        return (
            "from sagemaker.inputs import TrainingInput\n\n"
            f"train_input = TrainingInput(\n    s3_data={config.uri!r},\n"
            f"    input_mode={mode!r},\n    distribution='ShardedByS3Key',\n)\n"
        )
    fs_type = "FSxLustre" if "FSx" in mode else "EFS"
    return (
        "from sagemaker.inputs import FileSystemInput\n\n"
        "# Link the file system to the bucket first (FSx for Lustre: a data repository association"
        f" with {config.uri}).\n"
        "train_input = FileSystemInput(\n    file_system_id='fs-REPLACE-ME',\n"
        f"    file_system_type={fs_type!r},\n    directory_path='/REPLACE-ME',\n"
        "    file_system_access_mode='ro',\n)\n"
    )


def _rationale_lines(recommendation: Recommendation) -> list[str]:
    lines = []
    for decision in recommendation.decisions:
        rules = ", ".join(decision.rules)
        rationale = " ".join(decision.rationale.split())
        lines.append(f"#   {decision.name} = {decision.value} [{rules}]: {rationale}")
    return lines


def render_module(config: LoaderConfig, recommendation: Recommendation, snippet: str | None) -> str:
    data = pprint.pformat(dataclasses.asdict(config), indent=4, sort_dicts=True, width=96)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rationale = "\n".join(_rationale_lines(recommendation)) or "#   (none recorded)"
    sagemaker = (
        "\n# SageMaker input for this data source:\n"
        + "\n".join(f"#   {s}" for s in snippet.splitlines())
        if snippet
        else ""
    )
    return _TEMPLATE.format(
        uri=config.uri, stamp=stamp, config=data, rationale=rationale, sagemaker=sagemaker
    )


_TEMPLATE = '''"""DataLoader for {uri}, generated by Loader Advisor on {stamp}.

Usage:
    from dataloader_config import loader_stats, make_dataloader
    from native_loader import to_device
    loader = make_dataloader(rank=RANK, world_size=WORLD_SIZE)
    for batch in loader:
        batch = to_device(batch, "cuda")  # non_blocking: overlaps the copy when pin_memory is on
    print(loader_stats(loader))  # samples seen and skipped (on_error="skip")

No credentials are stored here: they are resolved at run time from the standard AWS chain
(environment variables, AWS_PROFILE / profile, SSO, web identity, instance or container role).
"""

from __future__ import annotations

import os
from typing import Any

CONFIG: dict[str, Any] = {config}

# Why these settings (rule ids refer to docs/decision-flow.md):
{rationale}
{sagemaker}

DATASET_KEYS = ("transform", "shuffle", "seed")


def make_dataset(rank: int = 0, world_size: int = 1, **overrides: Any) -> Any:
    """The native_loader dataset for this data set, sharded for `rank` of `world_size`."""
    from native_loader.decoders import default_decoder, load_transform
    from native_loader import ReaderConfig, S3IterableDataset
    from native_loader.sample_errors import SamplePolicy

    settings = {{**CONFIG, **overrides}}
    transform = settings["transform"]
    if transform is None:
        transform = default_decoder(settings["data_format"])
    elif isinstance(transform, str):
        transform = load_transform(transform)
    reader_config = ReaderConfig(
        endpoint_url=settings["endpoint_url"],
        region=settings["region"],
        profile=settings["profile"],
        max_inflight_requests=settings["max_inflight_requests"],
        max_inflight_bytes=settings["max_inflight_bytes"],
    )
    dataset = S3IterableDataset(
        settings["uri"],
        config=reader_config,
        transform=transform,
        shuffle=settings["shuffle"],
        seed=settings["seed"],
        shuffle_buffer=settings.get("shuffle_buffer", 0),
        tar_samples=settings["tar_samples"],
        rank=rank,
        world_size=world_size,
        cache_dir=settings["cache_dir"] and os.path.expanduser(settings["cache_dir"]),
        cache_max_bytes=settings["cache_max_bytes"] or 100 * 2**30,
        on_error=SamplePolicy(
            settings.get("on_error", "raise"), settings.get("max_skipped_share", 0.01)
        ),
    )
    dataset.uris()  # list the prefix once here; forked DataLoader workers share the listing
    return dataset


def make_dataloader(rank: int = 0, world_size: int = 1, **overrides: Any) -> Any:
    """A torch DataLoader with the recommended settings; keyword overrides win.

    Overrides may be DataLoader arguments (batch_size, num_workers, pin_memory, prefetch_factor,
    collate_fn, ...) or dataset settings (transform, shuffle, seed, uri, endpoint_url, on_error,
    max_skipped_share, ...).
    """
    import torch

    from native_loader.decoders import collate_list

    dataset_overrides = {{k: v for k, v in overrides.items() if k in CONFIG or k in DATASET_KEYS}}
    loader_overrides = {{k: v for k, v in overrides.items() if k not in dataset_overrides}}
    dataset = make_dataset(rank, world_size, **dataset_overrides)
    settings = {{**CONFIG, **dataset_overrides}}
    num_workers = loader_overrides.pop("num_workers", settings["num_workers"])
    kwargs: dict[str, Any] = dict(
        batch_size=settings["batch_size"],
        num_workers=num_workers,
        pin_memory=settings["pin_memory"] and torch.cuda.is_available(),
        collate_fn=collate_list,
    )
    if num_workers > 0:
        kwargs["prefetch_factor"] = settings["prefetch_factor"] or 2
        kwargs["persistent_workers"] = True
    kwargs.update(loader_overrides)
    return torch.utils.data.DataLoader(dataset, **kwargs)


def loader_stats(loader: Any) -> dict[str, int]:
    """Samples the loader's dataset has seen and skipped so far, in every worker."""
    return dict(loader.dataset.sample_stats())


if __name__ == "__main__":
    import itertools
    import time

    started = time.monotonic()
    loader = make_dataloader()
    batches = list(itertools.islice(loader, 3))
    print(f"read {{len(batches)}} batches in {{time.monotonic() - started:.2f}} s")
    print(loader_stats(loader))
'''

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
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.core.bounds import check_module_name
from advisor.core.location import DatasetLocation
from advisor.core.units import data_size
from advisor.core.workload import Workload
from native_loader.cache import DEFAULT_CACHE_BYTES
from native_loader.sample_errors import SamplePolicy
from native_loader.uri import uri_scheme

if TYPE_CHECKING:
    from advisor.decide.recommend import Decision, Recommendation
    from advisor.measure.profile import DatasetProfile

SCHEMA_VERSION = (
    5  # 2: inflight bytes; 3: on_error, max_skipped_share; 4: local_copy_dir; 5: unsigned
)
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
    # copy-local from S3: the folder `prepare()` copies the set into before the first epoch, and
    # every epoch reads; None = read where the data is (or through cache_dir)
    local_copy_dir: str | None = None
    # anonymous access (a public bucket): requests are sent unsigned and no credentials are read
    unsigned: bool = False
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
    demo: bool = False,
) -> ExportBundle:
    """The module and JSON for `recommendation`; `on_error` is what the loader does with a
    sample that fails (default: raise naming the object). A copy-local recommendation for data
    on S3 exports a `prepare()` step that makes the local copy every epoch reads; `demo`: the
    data is the advisor's demo endpoint (the module says which credentials it takes)."""
    policy = on_error if on_error is not None else SamplePolicy()
    fmt = recommendation.data_format or "binary"
    digest = hashlib.sha256(location.uri.encode()).hexdigest()[:12]
    cache_dir = cache_max = local_copy_dir = None
    if recommendation.data_source == "copy-local" and uri_scheme(location.uri) == "s3":
        local_copy_dir = f"{CACHE_ROOT}/{digest}/copy"
    if recommendation.cache_locally:
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
        local_copy_dir=local_copy_dir,
        unsigned=location.anonymous,
    )
    data = dataclasses.asdict(config)
    json_text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    snippet = sagemaker_snippet(config)
    module = render_module(config, recommendation, snippet, demo)
    return ExportBundle(config, module, json_text, snippet)


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


# How people read a decision's name; DataLoader arguments keep theirs (they are what to type).
_DECISION_LABELS = {
    "data_source": "read from", "requests_in_flight": "requests in flight",
    "inflight_bytes": "bytes in flight", "shard_size": "shard size",
    "prefix_layout": "key prefixes", "throughput": "expected throughput",
    "preprocess": "preprocessing", "cost": "cost",
}  # fmt: skip
_BYTE_DECISIONS = frozenset({"shard_size", "inflight_bytes"})


def decision_label(decision: Decision) -> str:
    return _DECISION_LABELS.get(decision.name, decision.name)


def decision_value(decision: Decision) -> str:
    """The decided value for people, its size in the one unit system (advisor.core.units)."""
    value = decision.value
    whole = isinstance(value, int) and not isinstance(value, bool)
    if decision.name in _BYTE_DECISIONS and whole:
        return data_size(value) + (" per process" if decision.name == "inflight_bytes" else "")
    if decision.name == "num_workers" and whole:
        return (
            f"{value} (loading in the training process)"
            if value == 0
            else (f"{value} worker process{'es' if value != 1 else ''}")
        )
    if decision.name == "prefetch_factor" and whole:
        return f"{value} batches per worker"
    return decision.display


def _rationale_lines(recommendation: Recommendation) -> list[str]:
    lines = []
    for decision in recommendation.decisions:
        rules = ", ".join(decision.rules)
        rationale = " ".join(decision.rationale.split())
        lines.append(
            f"#   {decision_label(decision)}: {decision_value(decision)} [{rules}]: {rationale}"
        )
    return lines


def _reads_note(config: LoaderConfig) -> str:
    """What later epochs read, for the module's docstring."""
    if config.local_copy_dir:
        return (
            f"Every epoch reads a local copy in {config.local_copy_dir} (copy-local): "
            "`make_dataloader` makes it on first use with one process; with several ranks, run "
            "this module with `--prepare` once per node first. The copy is resumable and "
            "checks each object's size and ETag against the listing."
        )
    if config.cache_dir:
        return (
            f"The first epoch streams from {config.uri} and fills a local cache in "
            f"{config.cache_dir}; later epochs read the cached files."
        )
    return f"Every epoch reads {config.uri} where it is."


_CREDENTIALS = {
    False: "No credentials are stored here: they are resolved at run time from the standard AWS "
    "chain\n(environment variables, AWS_PROFILE / profile, SSO, web identity, instance or "
    "container role),\nor passed in: make_dataloader(credentials=native_loader.Credentials(...)).",
    True: "Requests are sent unsigned (a public bucket): no credentials are read, stored or sent.",
}


def _demo_note(demo: bool) -> str:
    if not demo:
        return ""
    return (
        "\nThe data is the Loader Advisor demo endpoint: it takes the access key "
        "`loader-advisor-demo` and its secret\n(`python -m advisor.demo` prints both), or the "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY it was started with.\n"
    )


def render_module(
    config: LoaderConfig, recommendation: Recommendation, snippet: str | None, demo: bool = False
) -> str:
    data = pprint.pformat(dataclasses.asdict(config), indent=4, sort_dicts=True, width=96)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rationale = "\n".join(_rationale_lines(recommendation)) or "#   (none recorded)"
    sagemaker = (
        "\n# SageMaker input for this data source:\n"
        + "\n".join(f"#   {s}" for s in snippet.splitlines())
        if snippet
        else ""
    )
    reads = textwrap.fill(_reads_note(config), width=96)
    return _TEMPLATE.format(
        uri=config.uri, stamp=stamp, config=data, rationale=rationale, sagemaker=sagemaker,
        reads=reads, demo=_demo_note(demo), credentials=_CREDENTIALS[config.unsigned],
    )  # fmt: skip


_TEMPLATE = '''"""DataLoader for {uri}, generated by Loader Advisor on {stamp}.

Usage:
    from dataloader_config import loader_stats, make_dataloader
    from native_loader import to_device
    loader = make_dataloader(rank=RANK, world_size=WORLD_SIZE)
    for batch in loader:
        batch = to_device(batch, "cuda")  # non_blocking: overlaps the copy when pin_memory is on
    print(loader_stats(loader))  # samples seen and skipped (on_error="skip")

A batch is a list of `batch_size` samples as the transform returns them, not a stacked tensor:
the default image decoders (jpeg, png) give uint8 tensors of shape (H, W, C) whose sizes differ.
Pass collate_fn=... to make_dataloader to stack samples your transform makes equal in size.

{reads}

{credentials}
{demo}"""

from __future__ import annotations

import os
import sys
from typing import Any

CONFIG: dict[str, Any] = {config}

# Why these settings (rule ids refer to docs/decision-flow.md):
{rationale}
{sagemaker}

DATASET_KEYS = ("transform", "shuffle", "seed")
LOADER_KEYS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor")


def _reader_config(settings: dict[str, Any]) -> Any:
    from native_loader import ReaderConfig

    return ReaderConfig(
        endpoint_url=settings["endpoint_url"],
        region=settings["region"],
        profile=settings["profile"],
        max_inflight_requests=settings["max_inflight_requests"],
        max_inflight_bytes=settings["max_inflight_bytes"],
        unsigned=settings.get("unsigned", False),
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def prepare(progress: Any = _say, credentials: Any = None) -> str | None:
    """Make the local copy every epoch reads (copy-local), before the first epoch: resumable,
    each object checked against its listed size and ETag. None: this loader reads in place.
    credentials: a native_loader.Credentials (None: the standard AWS chain)."""
    from native_loader.loader import copy_to_local

    if not CONFIG.get("local_copy_dir"):
        return None
    return copy_to_local(
        CONFIG["uri"], CONFIG["local_copy_dir"], config=_reader_config(CONFIG), progress=progress,
        credentials=credentials,
    )  # fmt: skip


def _source(settings: dict[str, Any], world_size: int, credentials: Any = None) -> str:
    """Where the dataset reads: the local copy once made (made here with one process), else
    the data set's URI."""
    from native_loader.loader import local_copy_complete

    copy_dir = settings.get("local_copy_dir")
    if not copy_dir or settings["uri"] != CONFIG["uri"]:
        return settings["uri"]
    if not local_copy_complete(copy_dir):
        if world_size > 1:
            raise RuntimeError(
                f"the local copy in {{copy_dir}} is not made yet: run "
                f"`python {{os.path.basename(__file__)}} --prepare` once per node first"
            )
        prepare(credentials=credentials)
    return os.path.join(os.path.expanduser(copy_dir), "")


def make_dataset(
    rank: int = 0, world_size: int = 1, credentials: Any = None, **overrides: Any
) -> Any:
    """The native_loader dataset for this data set, sharded for `rank` of `world_size`.
    credentials: a native_loader.Credentials (None: the standard AWS chain)."""
    from native_loader.decoders import default_decoder, load_transform
    from native_loader.loader import make_dataset as build_dataset
    from native_loader.sample_errors import SamplePolicy

    settings = {{**CONFIG, **overrides}}
    transform = settings["transform"]
    if transform is None:
        transform = default_decoder(settings["data_format"])
    elif isinstance(transform, str):
        transform = load_transform(transform)
    dataset = build_dataset(
        _source(settings, world_size, credentials),
        config=_reader_config(settings),
        credentials=credentials,
        transform=transform,
        shuffle=settings["shuffle"],
        seed=settings["seed"],
        shuffle_buffer=settings.get("shuffle_buffer", 0),
        tar_samples=settings["tar_samples"],
        rank=rank,
        world_size=world_size,
        cache_dir=settings["cache_dir"],
        cache_max_bytes=settings["cache_max_bytes"] or 100 * 2**30,
        on_error=SamplePolicy(
            settings.get("on_error", "raise"), settings.get("max_skipped_share", 0.01)
        ),
    )
    dataset.uris()  # list the prefix once here; forked DataLoader workers share the listing
    return dataset


def make_dataloader(
    rank: int = 0, world_size: int = 1, credentials: Any = None, **overrides: Any
) -> Any:
    """A torch DataLoader with the recommended settings (native_loader.loader's factory, the
    one the advisor's trial measured with); keyword overrides win. credentials: a
    native_loader.Credentials (None: the standard AWS chain; never written to this file).

    Overrides may be DataLoader arguments (batch_size, num_workers, pin_memory, prefetch_factor,
    collate_fn, ...) or dataset settings (transform, shuffle, seed, uri, endpoint_url, on_error,
    max_skipped_share, ...).
    """
    from native_loader.loader import LoaderSettings
    from native_loader.loader import make_dataloader as build_loader

    loader_keys = [k for k in overrides if k in LOADER_KEYS]
    loader_settings = {{k: overrides.pop(k) for k in loader_keys}}
    dataset_overrides = {{k: v for k, v in overrides.items() if k in CONFIG or k in DATASET_KEYS}}
    loader_overrides = {{k: v for k, v in overrides.items() if k not in dataset_overrides}}
    dataset = make_dataset(rank, world_size, credentials, **dataset_overrides)
    settings = {{**CONFIG, **loader_settings}}
    loader = LoaderSettings(
        batch_size=settings["batch_size"],
        num_workers=settings["num_workers"],
        pin_memory=settings["pin_memory"],
        prefetch_factor=settings["prefetch_factor"],
    )
    return build_loader(dataset, loader, **loader_overrides)


def loader_stats(loader: Any) -> dict[str, int]:
    """Samples the loader's dataset has seen and skipped so far, in every worker."""
    return dict(loader.dataset.sample_stats())


if __name__ == "__main__":
    import itertools
    import time

    if "--prepare" in sys.argv[1:]:
        print(prepare() or "nothing to prepare: this loader reads the data where it is")
        sys.exit(0)
    started = time.monotonic()
    loader = make_dataloader()
    batches = list(itertools.islice(loader, 3))
    print(f"read {{len(batches)}} batches in {{time.monotonic() - started:.2f}} s")
    print(loader_stats(loader))
'''

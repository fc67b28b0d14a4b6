"""A loader's settings as plain data: `LoaderSettings` (the DataLoader arguments the advice sets)
and `LoaderConfig` (everything an exported loader needs: the `CONFIG` of a module that
`advisor.export` writes, and its JSON), with the schema version and the check that a config is
one this runtime understands. Nothing here imports torch.

    config = LoaderConfig.from_dict(json.load(open("loader.json")))  # ValueError if it is not
    config.loader.num_workers, config.reader_config(), config.sample_policy()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from native_loader.config import ReaderConfig
from native_loader.listing import DEFAULT_INDEX_DIR, DEFAULT_INDEX_MAX_AGE_S
from native_loader.sample_errors import SamplePolicy

DEFAULT_PREFETCH = 2  # torch's own default: batches in flight per worker
DEFAULT_CACHE_MAX_BYTES = 100 * 2**30  # an exported cache without a cap of its own

# 2: inflight bytes; 3: on_error, max_skipped_share; 4: local_copy_dir; 5: unsigned; 6: records;
# 7: the DataLoader arguments nested as "loader" (a LoaderSettings), and the module a thin face
# on native_loader.loader.from_config (modules of 1-6 carry their own code, and still run);
# 8: index_dir, index_max_age_s (the listing saved in the home cache)
SCHEMA_VERSION = 8
# the earliest version this runtime reads: a thin module of 7 runs on it, the settings added
# since taking their defaults (a runtime of 7 says that a config of 8 needs a later one)
OLDEST_READ = 7


@dataclass(frozen=True)
class LoaderSettings:
    """The DataLoader arguments the advice sets: what the trial measures with and what is
    exported. `pin_memory` takes effect only where CUDA is available."""

    batch_size: int
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None  # per worker; None = DEFAULT_PREFETCH with workers

    def dataloader_kwargs(self, cuda_available: bool | None = None) -> dict[str, Any]:
        """The `torch.utils.data.DataLoader` arguments (without the dataset and collate_fn).

        With workers, they persist across epochs (no restart cost per epoch) and keep
        `prefetch_factor` batches each in flight; torch refuses a prefetch without workers."""
        cuda = cuda_available
        if cuda is None:
            import torch

            cuda = torch.cuda.is_available()
        kwargs: dict[str, Any] = {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory and cuda,
        }
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor or DEFAULT_PREFETCH
            kwargs["persistent_workers"] = True
        return kwargs


@dataclass(frozen=True)
class LoaderConfig:
    """Everything an exported loader needs, as plain data: no secrets, JSON through
    `dataclasses.asdict` (`to_dict`), read back with `from_dict`."""

    uri: str
    endpoint_url: str | None
    region: str | None
    profile: str | None  # an AWS profile name, never its keys
    tar_samples: bool  # iterate WebDataset tar shards as samples
    data_format: str  # the default decoder's format when `transform` is None
    transform: str | None  # "module:callable"; None = the default decoder for data_format
    loader: LoaderSettings  # batch_size, num_workers, pin_memory, prefetch_factor
    shuffle: bool
    seed: int
    # what was advised, kept for people and tools (the loader reads none of these three)
    data_source: str
    sagemaker_input_mode: str | None
    shard_size_bytes: int | None
    max_inflight_requests: int  # the reader's requests in flight per process
    max_inflight_bytes: int  # bytes (B) the reader keeps in flight per process
    cache_dir: str | None  # local copy after the first epoch (multi-epoch streaming); None = off
    cache_max_bytes: int | None  # bytes (B); None = DEFAULT_CACHE_MAX_BYTES
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
    # text shards read as records, streamed: "lines" (str), "jsonl" (parsed JSON), "csv" (a dict
    # per row); a sample is a record and `transform` applies to each. None: objects or tar samples
    records: str | None = None
    # the prefix's listing saved in index_dir (`~` expanded) so that later runs and the other
    # ranks of a node load it instead of listing again, while it is younger than
    # index_max_age_s seconds (0: listed again at every start); None: never saved
    index_dir: str | None = DEFAULT_INDEX_DIR
    index_max_age_s: float = DEFAULT_INDEX_MAX_AGE_S
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        age = self.index_max_age_s
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not age >= 0:
            raise ValueError(f"{self.index_max_age_s=} must be a number of seconds >= 0")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoaderConfig:
        """The config `data` holds (a module's CONFIG, its JSON parsed). ValueError, naming
        what this runtime does not understand, for another schema version, a name it does
        not know or one it needs that is missing."""
        check_schema(data)
        loader = data.get("loader")
        if not isinstance(loader, Mapping):
            raise ValueError(f"the loader config's 'loader' must be a mapping, not {loader!r}")
        problems = _names(data, cls, "") + _names(loader, LoaderSettings, "loader.")
        if problems:
            raise ValueError(
                f"this native_loader does not understand the loader config (schema version "
                f"{SCHEMA_VERSION}): {'; '.join(problems)}"
            )
        # an earlier config is read as this version, its later settings at their defaults
        return cls(**{**data, "loader": LoaderSettings(**loader), "schema_version": SCHEMA_VERSION})

    def reader_config(self) -> ReaderConfig:
        """The reader's settings: where the data is and how much is in flight per process."""
        return ReaderConfig(
            endpoint_url=self.endpoint_url,
            region=self.region,
            profile=self.profile,
            max_inflight_requests=self.max_inflight_requests,
            max_inflight_bytes=self.max_inflight_bytes,
            unsigned=self.unsigned,
        )

    def sample_policy(self) -> SamplePolicy:
        return SamplePolicy(self.on_error, self.max_skipped_share)


def check_schema(data: Mapping[str, Any]) -> None:
    """ValueError unless `data` is a loader config of a schema version this runtime reads
    (`OLDEST_READ` to `SCHEMA_VERSION`), saying what to do: an earlier one is exported again, a
    later one needs a later runtime."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(
            f"not a Loader Advisor loader config: its schema_version is {version!r} (this "
            f"native_loader reads version {SCHEMA_VERSION})"
        )
    if OLDEST_READ <= version <= SCHEMA_VERSION:
        return
    if version < OLDEST_READ:
        raise ValueError(
            f"this loader config has schema version {version}, from an earlier Loader Advisor; "
            f"this native_loader reads versions {OLDEST_READ} to {SCHEMA_VERSION}: export it "
            "again (python -m advisor recommend ... --export, or the wizard's Export step)"
        )
    raise ValueError(
        f"this loader config has schema version {version}, from a later Loader Advisor than "
        f"this native_loader (which reads version {SCHEMA_VERSION}): install that "
        "loader-advisor where the loader runs (pip install -U loader-advisor), or export again "
        "with this one"
    )


def _names(data: Mapping[str, Any], record: type, prefix: str) -> list[str]:
    """What is wrong with the names of `data` as the fields of `record`: names it does not
    have, and names without a default that `data` lacks."""
    fields = dataclasses.fields(record)
    known = {f.name for f in fields}
    unknown = sorted(f"{prefix}{name}" for name in data if name not in known)
    missing = sorted(
        f"{prefix}{f.name}"
        for f in fields
        if f.name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
    problems = []
    if unknown:
        problems.append(f"unknown settings {', '.join(unknown)}")
    if missing:
        problems.append(f"missing settings {', '.join(missing)}")
    return problems

"""Export a recommendation as a runnable Python module and JSON. Never with credentials.

The module only stores where the data is and how to load it (its CONFIG, a
`native_loader.settings.LoaderConfig` as a dict, the JSON's content) and calls the runtime,
`native_loader.loader.from_config`, which builds the loader; at run time `native_loader`
resolves credentials from the standard AWS chain (environment, profile, SSO, web identity,
instance or container role), so the file can be committed and shared.
"""

from __future__ import annotations

import hashlib
import json
import pprint
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from advisor.core.bounds import check_module_name
from advisor.core.homecache import CACHE_ROOT
from advisor.core.location import DatasetLocation
from advisor.core.units import duration
from advisor.core.workload import Workload
from advisor.export_template import MODULE_TEMPLATE
from advisor.report.recommendation import decision_label, decision_value
from native_loader.cache import DEFAULT_CACHE_BYTES
from native_loader.sample_errors import SamplePolicy
from native_loader.settings import SCHEMA_VERSION as SCHEMA_VERSION
from native_loader.settings import LoaderConfig, LoaderSettings
from native_loader.uri import uri_scheme

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation
    from advisor.measure.profile import DatasetProfile


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
        # the module names itself in its docstring and messages as it is saved
        source = self.module_source.replace("from dataloader_config import", f"from {stem} import")
        module_path.write_text(source.replace("python dataloader_config.py", f"python {stem}.py"))
        json_path.write_text(self.json_text)
        return module_path, json_path


def build_export(
    location: DatasetLocation,
    recommendation: Recommendation,
    workload: Workload,
    profile: DatasetProfile | None = None,
    on_error: SamplePolicy | None = None,
    demo: bool = False,
    demo_dummy_keys: bool = True,
) -> ExportBundle:
    """The module and JSON for `recommendation`; `on_error` is what the loader does with a
    sample that fails (default: raise naming the object). A copy-local recommendation for data
    on S3 exports a `prepare()` step that makes the local copy every epoch reads; `demo`: the
    data is the advisor's demo endpoint (the module says which credentials it takes: the
    public dummy keys where `demo_dummy_keys`, and reads its complete local copy once the
    demo is gone)."""
    policy = on_error if on_error is not None else SamplePolicy()
    fmt = recommendation.data_format or "binary"
    digest = hashlib.sha256(_source_identity(location, demo).encode()).hexdigest()[:12]
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
        loader=LoaderSettings(
            batch_size=workload.batch_size,
            num_workers=recommendation.num_workers,
            pin_memory=recommendation.pin_memory,
            prefetch_factor=recommendation.prefetch_factor,
        ),
        shuffle=True,
        seed=0,
        data_source=recommendation.data_source,
        sagemaker_input_mode=recommendation.sagemaker_input_mode,
        shard_size_bytes=recommendation.shard_size_bytes,
        max_inflight_requests=recommendation.requests_in_flight,
        max_inflight_bytes=recommendation.inflight_bytes,
        cache_dir=cache_dir,
        cache_max_bytes=cache_max,
        shuffle_buffer=shuffle_buffer(profile) if fmt == "tar" or recommendation.records else 0,
        on_error=policy.on_error,
        max_skipped_share=policy.max_skipped_share,
        local_copy_dir=local_copy_dir,
        unsigned=location.anonymous,
        records=recommendation.records,
    )
    json_text = json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n"
    snippet = sagemaker_snippet(config)
    module = render_module(config, recommendation, snippet, demo, demo_dummy_keys)
    return ExportBundle(config, module, json_text, snippet)


def _source_identity(location: DatasetLocation, demo: bool) -> str:
    """What names the data set's folders in the home cache. One URI on two endpoints is two
    data sets (AWS's own keeps the URI alone, the name exports made before the endpoint
    counted); the demo's data is one data set on every kernel's port, named by its version
    and spec: one copy however many kernels."""
    if demo:
        from advisor.demo.datasets import DemoSpec, data_identity

        return f"loader-advisor-demo {data_identity(DemoSpec())}\0{location.uri}"
    endpoint = location.endpoint_url
    return location.uri if not endpoint else f"{endpoint}\0{location.uri}"


SHUFFLE_BUFFER_BYTES = 64 * 2**20  # per DataLoader worker


def shuffle_buffer(profile: DatasetProfile | None) -> int:
    """Samples in each worker's shuffle buffer for streamed shards (tar samples, text records):
    the shard order is shuffled per epoch, and the buffer mixes samples across the shards a
    worker reads, up to about SHUFFLE_BUFFER_BYTES of samples (100 to 5,000; 1,000 when the
    sample size is unknown)."""
    streamed = (
        next((f for f in profile.formats if f.name == "tar" or f.records), None)
        if profile
        else None
    )
    sample_bytes = streamed.bytes_per_record if streamed is not None else None
    if sample_bytes is None:
        return 1000
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
        lines.append(
            f"#   {decision_label(decision)}: {decision_value(decision)} [{rules}]: {rationale}"
        )
    return lines


def _reads_note(config: LoaderConfig) -> str:
    """What later epochs read, for the module's docstring."""
    if config.local_copy_dir:
        return (
            f"Every epoch reads a local copy in {config.local_copy_dir} (copy-local): "
            "`make_dataloader` makes it on first use with one process, and at every start checks "
            "it against the listing (each object's key, size and ETag), bringing it up to date "
            "where it differs; with several ranks, run this module with `--prepare` once per "
            "node first. Processes preparing the copy at once take turns."
        )
    if config.cache_dir:
        return (
            f"The first epoch streams from {config.uri} and fills a local cache in "
            f"{config.cache_dir}; later epochs read the cached files."
        )
    if config.data_source == "reshard-first":
        return (
            f"Every epoch reads {config.uri} where it is, unpacked, but the advice is to pack it "
            "into tar shards first (`python -m advisor reshard`): num_workers was chosen for the "
            "packed shards (measured on a packed sample where the trial made one). Once packed, "
            "advise on and export the shards."
        )
    return f"Every epoch reads {config.uri} where it is."


def _listing_note(config: LoaderConfig) -> str:
    """Where the listing of a set read from S3 is saved, for the module's docstring (a
    copy-local loader reads its local copy, checked against a fresh listing at every start)."""
    if config.local_copy_dir or not config.index_dir or uri_scheme(config.uri) != "s3":
        return ""
    return (
        f" Its listing is saved in {config.index_dir}: later runs and the other ranks of the "
        f"node load it instead of listing again while it is younger than "
        f"{duration(config.index_max_age_s)} (make_dataloader(index_max_age_s=0) lists again; "
        "index_dir=None saves nothing; `python -m advisor cache` lists and removes it)."
    )


_RECORDS = {
    "lines": "a line of text (`str`, without its line end)",
    "jsonl": "a JSON line, parsed (`json.loads`)",
    "csv": "a CSV row (a `dict` from the header's names to the row's fields)",
}


def _batch_note(config: LoaderConfig) -> str:
    """What a batch is, for the module's docstring."""
    if config.records:
        return (
            f"A batch is a list of `batch_size` records, each {_RECORDS[config.records]}: the "
            "text shards stream\nrecord by record, split between ranks and workers by shard, so "
            "every record comes once an epoch.\nThe transform, if any, applies to each record "
            "(none by default: records as they are); to\nwork on whole batches (a tokenizer), "
            "pass collate_fn=... to make_dataloader."
        )
    note = (
        "A batch is a list of `batch_size` samples as the transform returns them, not a stacked "
        "tensor:\nthe default image decoders (jpeg, png) give uint8 tensors of shape (H, W, C) "
        "whose sizes differ.\nPass collate_fn=... to make_dataloader to stack samples your "
        "transform makes equal in size."
    )
    if not config.tar_samples:
        return note
    return note + (
        '\nEach tar sample reaches the transform as a dict {"__key__": key, "<ext>": bytes, ...}'
        " (the default\ndecoder decodes each member by its extension). Shards packed by "
        "`python -m advisor reshard` hold one\nobject per sample (plus a `cls` label where "
        "folders name classes): a transform written for one\nobject's bytes takes it as "
        "`native_loader.decoders.on_payload(transform)`, as the advisor's trial\napplies it "
        "to a packed sample."
    )


_CREDENTIALS = {
    False: "No credentials are stored here: they are resolved at run time from the standard AWS "
    "chain\n(environment variables, AWS_PROFILE / profile, SSO, web identity, instance or "
    "container role),\nor passed in: make_dataloader(credentials=native_loader.Credentials(...)).",
    True: "Requests are sent unsigned (a public bucket): no credentials are read, stored or sent.",
}


def demo_serve_command(endpoint_url: str | None) -> str:
    """The command that serves the demo again where an export of its data reads it."""
    port = urlsplit(endpoint_url or "").port
    return f"python -m advisor.demo serve --port {port}" if port else "python -m advisor.demo serve"


def demo_keys(dummy: bool) -> str:
    """The demo's keys as the module's error gives them: the local demo server's public dummy
    keys (in the source, never a secret), else where to find the keys it was started with."""
    if not dummy:
        return "the keys the demo was started with, in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    from advisor.demo.server import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY

    return (
        "its public dummy keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: "
        f"AWS_ACCESS_KEY_ID={DUMMY_ACCESS_KEY} AWS_SECRET_ACCESS_KEY={DUMMY_SECRET_KEY}"
    )


def _demo_note(demo: bool, endpoint_url: str | None, dummy: bool) -> str:
    """How to run a module that reads the demo: its endpoint ends with the kernel (or `make
    lab`) that started it; the same demo served on the same port reads the same again, and a
    complete local copy (copy-local) is read while it is gone."""
    if not demo:
        return ""
    from advisor.demo.server import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY

    keys = (DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY) if dummy else ("<access key>", "<secret key>")
    run = f"AWS_ACCESS_KEY_ID={keys[0]} AWS_SECRET_ACCESS_KEY={keys[1]} python dataloader_config.py"
    given = (
        f"The data is on the Loader Advisor demo endpoint {endpoint_url}, which ends with the "
        f"kernel (or `make lab`) that started it. Give this file its keys in AWS_ACCESS_KEY_ID "
        "and AWS_SECRET_ACCESS_KEY, "
        + ("the local server's public dummy keys:" if dummy else "the keys it was started with:")
    )
    gone = (
        "After the demo has ended, a complete local copy (copy-local) is read as it was last "
        "checked, saying so; without one, serve the demo again on the same port, in another "
        "terminal:"
    )
    return (
        f"\n{textwrap.fill(given, width=96)}\n    {run}\n{textwrap.fill(gone, width=96)}\n"
        f"    {demo_serve_command(endpoint_url)}\n"
    )


def render_module(
    config: LoaderConfig,
    recommendation: Recommendation,
    snippet: str | None,
    demo: bool = False,
    demo_dummy_keys: bool = True,
) -> str:
    data = pprint.pformat(config.to_dict(), indent=4, sort_dicts=True, width=96)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rationale = "\n".join(_rationale_lines(recommendation)) or "#   (none recorded)"
    sagemaker = (
        "\n# SageMaker input for this data source:\n"
        + "\n".join(f"#   {s}" for s in snippet.splitlines())
        if snippet
        else ""
    )
    reads = textwrap.fill(_reads_note(config) + _listing_note(config), width=96)
    return MODULE_TEMPLATE.format(
        uri=config.uri, stamp=stamp, config=data, rationale=rationale, sagemaker=sagemaker,
        reads=reads, demo=_demo_note(demo, config.endpoint_url, demo_dummy_keys),
        demo_serve=demo_serve_command(config.endpoint_url) if demo else None,
        demo_keys=demo_keys(demo_dummy_keys) if demo else None,
        credentials=_CREDENTIALS[config.unsigned],
        batch=_batch_note(config),
    )  # fmt: skip

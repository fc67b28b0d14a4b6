"""A saved export of the demo's data once the demo is gone (issue 55): it reads its complete
local copy, saying so, `--prepare` included; with no complete copy its one-line error gives the
demo's public dummy keys; an export of any other data never reads a copy its endpoint did not
check. "Gone" is the module's CONFIG pointed at a port this test holds, which refuses every
connection, run in a fresh interpreter with no AWS variables, as after the kernel ended."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

from advisor.core.workload import Workload
from advisor.demo.server import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, S3Endpoint
from advisor.export import build_export
from native_loader.exported import one_line
from tests.export_helpers import advised_session, run_exported

# the module's command line, with its CONFIG's endpoint replaced by `gone` when given
RUN = (
    "import sys, {stem}\n"
    "from native_loader.exported import main\n"
    "config = {{**{stem}.CONFIG, 'endpoint_url': {gone!r} or {stem}.CONFIG['endpoint_url']}}\n"
    "sys.exit(main(config, sys.argv[1:], {stem}.DEMO_SERVE, {stem}.DEMO_KEYS))\n"
)


def _export(endpoint: S3Endpoint, bucket: str, folder: Path, stem: str, demo: bool) -> str:
    """A copy-local export of s3://bucket/data/ (the demo's data where `demo`); its copy's
    folder."""
    session = advised_session(
        f"s3://{bucket}/data/", Workload(batch_size=4), endpoint_url=endpoint.url
    )
    assert session.recommendation is not None and session.location is not None
    copy_local = dataclasses.replace(
        session.recommendation, data_source="copy-local", cache_locally=False, num_workers=0
    )
    bundle = build_export(
        session.location, copy_local, session.workload, session.profile, demo=demo,
        demo_dummy_keys=demo,
    )  # fmt: skip
    bundle.save(folder, stem)
    assert bundle.config.local_copy_dir is not None
    return bundle.config.local_copy_dir


def _run(
    folder: Path, stem: str, home: Path, *args: str, gone: str | None = None, keys: bool = False
) -> subprocess.CompletedProcess[str]:
    """The module's command line in a fresh terminal: no AWS settings, or with `keys` the test
    endpoint's keys, as the kernel's variables gave them."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if keys else ()
    code = RUN.format(stem=stem, gone=gone)
    aws = {name: os.environ[name] for name in names}
    return run_exported(folder / f"{stem}.py", *args, code=code, home=home, aws=aws)


def test_a_demo_export_reads_its_complete_copy_once_the_demo_is_gone(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
    own_port: int,
) -> None:
    for i in range(12):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin", Body=bytes([i]) * 5000)
    home, gone = tmp_path / "home", f"http://127.0.0.1:{own_port}"
    folder = _export(s3_endpoint, s3_bucket, tmp_path, "demo_loader", demo=True)
    copy = home / folder.removeprefix("~/")  # the module's HOME is `home`
    made = _run(tmp_path, "demo_loader", home, "--prepare", keys=True)
    assert made.returncode == 0, made.stderr
    assert (copy / "_complete").exists()

    offline = _run(tmp_path, "demo_loader", home, gone=gone)
    assert offline.returncode == 0, offline.stderr
    assert "read 3 batches" in offline.stdout
    said = f"{gone} cannot be reached: reading the local copy in "
    assert said in offline.stderr and "12 objects" in offline.stderr, offline.stderr
    assert f"as last checked against s3://{s3_bucket}/data/ on {s3_endpoint.url}" in offline.stderr
    prepared = _run(tmp_path, "demo_loader", home, "--prepare", gone=gone)
    assert prepared.returncode == 0 and said in prepared.stderr, prepared.stderr
    assert "already local (nothing fetched now)" in prepared.stdout, prepared.stdout

    # a copy with a file cut short is no copy to read: the error says so and gives the keys
    (copy / "003.bin").write_bytes(b"x")
    broken = _run(tmp_path, "demo_loader", home, gone=gone)
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken.stderr
    assert broken.stderr.startswith(f"error: cannot reach the demo endpoint {gone} (no complete")
    assert f"AWS_ACCESS_KEY_ID={DUMMY_ACCESS_KEY}" in broken.stderr
    assert f"AWS_SECRET_ACCESS_KEY={DUMMY_SECRET_KEY}" in broken.stderr


def test_an_export_of_other_data_never_reads_a_copy_its_endpoint_did_not_check(
    s3_endpoint: S3Endpoint,
    s3_client,  # type: ignore[no-untyped-def]
    s3_bucket: str,
    tmp_path: Path,
    own_port: int,
) -> None:
    for i in range(4):
        s3_client.put_object(Bucket=s3_bucket, Key=f"data/{i:03d}.bin", Body=bytes([i]) * 5000)
    home = tmp_path / "home"
    _export(s3_endpoint, s3_bucket, tmp_path, "own_loader", demo=False)
    assert _run(tmp_path, "own_loader", home, "--prepare", keys=True).returncode == 0
    gone = _run(tmp_path, "own_loader", home, gone=f"http://127.0.0.1:{own_port}", keys=True)
    assert gone.returncode == 1 and "ConnectionError" in gone.stderr, gone.stderr
    assert "reading the local copy" not in gone.stderr


def test_the_running_demo_asks_for_its_dummy_keys_not_for_a_second_demo(
    s3_endpoint: S3Endpoint,
) -> None:
    """While the demo runs (its port answers), a module without keys is told the keys
    themselves: `python -m advisor.demo serve --port N` would be refused, its port in use."""
    from advisor.export import demo_keys

    config = {"endpoint_url": s3_endpoint.url}
    serve = f"python -m advisor.demo serve --port {s3_endpoint.url.rsplit(':', 1)[1]}"
    line = one_line(PermissionError("no credentials"), config, serve, demo_keys(True))
    assert line.startswith("the demo endpoint wants its keys (no credentials): give it its")
    assert f"AWS_ACCESS_KEY_ID={DUMMY_ACCESS_KEY} AWS_SECRET_ACCESS_KEY={DUMMY_SECRET_KEY}" in line
    assert serve not in line
    started_with_own = one_line(PermissionError("denied"), config, serve, demo_keys(False))
    assert DUMMY_SECRET_KEY not in started_with_own  # keys of the user's own are never printed


def test_the_demo_module_names_its_keys() -> None:
    """The rendered module carries the public dummy keys for its error and its docstring, and
    reads its complete copy once the demo is gone; another module does neither."""
    from advisor.core.location import DatasetLocation
    from advisor.decide.recommend import recommend
    from tests.builders import hardware, s3_profile

    profile, workload = s3_profile(200, 100_000), Workload(batch_size=8)
    rec = dataclasses.replace(recommend(profile, hardware(), workload), data_source="copy-local")
    uri = "s3://loader-advisor-demo/small-images/"
    location = DatasetLocation(uri, endpoint_url="http://127.0.0.1:4")
    source = build_export(location, rec, workload, profile, demo=True).module_source
    docstring, code = source.split("CONFIG: dict", 1)
    assert f"AWS_SECRET_ACCESS_KEY={DUMMY_SECRET_KEY}" in docstring
    assert f"AWS_SECRET_ACCESS_KEY={DUMMY_SECRET_KEY}" in code.split("DEMO_KEYS")[1]
    assert "OFFLINE: bool = DEMO_SERVE is not None" in code
    other = build_export(location, rec, workload, profile).module_source
    assert DUMMY_SECRET_KEY not in other and "DEMO_SERVE: str | None = None" in other

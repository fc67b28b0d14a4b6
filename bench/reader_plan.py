"""The plan of `python -m bench reader`: the datasets, the clients to try on each (candidates and
their settings) and the scenarios that put a dataset on an endpoint, quick or full."""

from __future__ import annotations

from dataclasses import dataclass, field

LATENCY_MS = 30.0  # the nginx+30ms endpoint's added time to first byte
KIB, MIB = 2**10, 2**20


@dataclass(frozen=True)
class Dataset:
    """`count` objects of `size` bytes under ``bench/<name>/``."""

    name: str
    size: int
    count: int

    def object_keys(self) -> list[str]:
        return [f"{self.name}/obj-{i:05d}.bin" for i in range(self.count)]


@dataclass(frozen=True)
class Candidate:
    """A client and the settings (`concurrency` values) to try; the best one is reported."""

    client: str
    settings: tuple[int, ...]
    label: str = ""
    each: bool = False  # report every setting (with repeats), not only the best

    @property
    def name(self) -> str:
        return self.label or self.client


@dataclass(frozen=True)
class Scenario:
    """One dataset on one endpoint, with the candidates to run on it."""

    name: str
    endpoint: str  # "seaweedfs", "nginx" or "nginx+30ms"
    dataset: Dataset
    candidates: tuple[Candidate, ...]


@dataclass
class Plan:
    seconds: float
    repeats: int
    datasets: dict[str, Dataset]
    scenarios: list[Scenario] = field(default_factory=list)


def _small(ds: Dataset, signed: bool, quick: bool) -> tuple[Candidate, ...]:
    """Candidates for many small objects: concurrency = requests/threads/connections."""
    cands = [
        Candidate("native", (16, 64) if quick else (16, 64, 128)),
        Candidate("native-uri", (64,)),
        Candidate("boto3", (1,), "boto3-seq"),
        Candidate("boto3", (16,) if quick else (8, 16, 32), "boto3-pool"),
        Candidate("s3fs", (64,) if quick else (32, 128)),
        Candidate("s3torchconnector", (16,) if quick else (16, 64)),
        Candidate("awscrt", (64,) if quick else (64, 256)),
        Candidate("curl", (32,) if quick else (16, 64)),
    ]
    if not signed:
        cands.append(Candidate("wrk", (32,) if quick else (16, 64)))
    return tuple(cands)


def _large(ds: Dataset, signed: bool, quick: bool) -> tuple[Candidate, ...]:
    """Candidates for a few large objects: native/awscrt/s3tc split them into 8 MiB parts.

    On loopback few streams win: at 2 parts in flight the reader's copies stay in cache, and
    4 or 8 read less."""
    cands = [
        Candidate("native", (2,) if quick else (2, 4, 16)),
        Candidate("native-uri", (16,)),
        Candidate("native-stream", (2, 8)),
        Candidate("boto3", (1,), "boto3-seq"),
        Candidate("boto3", (4,) if quick else (2, 6), "boto3-pool"),
        Candidate("s3fs", (4,) if quick else (2, 6)),
        Candidate("s3torchconnector", (4,) if quick else (2, 6)),
        Candidate("awscrt", (4,) if quick else (2, 6)),
        Candidate("curl", (4,) if quick else (2, 6)),
    ]
    if not signed:
        cands.append(Candidate("wrk", (4,) if quick else (2, 6)))
    return tuple(cands)


def _latency(quick: bool) -> tuple[Candidate, ...]:
    """Candidates behind 30 ms of first-byte latency: throughput <= concurrency / latency. wrk at
    the same settings as native shows what the proxy lets through at that concurrency."""
    settings = (32,) if quick else (16, 32, 64)
    return (
        Candidate("native", settings, each=True),
        Candidate("boto3", (32,) if quick else (16, 32), "boto3-pool"),
        Candidate("s3fs", (64,)),
        Candidate("s3torchconnector", (32,) if quick else (16, 64)),
        Candidate("awscrt", (64,)),
        Candidate("curl", (64,)),
        Candidate("wrk", settings, each=True),
    )


def _local(ds: Dataset, quick: bool) -> tuple[Candidate, ...]:
    """Candidates for local files: native reads them ahead on its pool (`read_many`) or
    streams them (`open_many`); Python's open().read() in the consumer's thread or a pool."""
    large = ds.size >= 8 * MIB
    return (
        Candidate("native", (4,) if quick else (4, 16)),
        Candidate("native-stream", (2, 8) if large else (8,)),
        Candidate("open", (1,), "open-seq"),
        Candidate("open", (4,) if quick else (4, 16), "open-pool"),
    )


def make_plan(quick: bool) -> Plan:
    if quick:
        sets = [Dataset("large", 64 * MIB, 4), Dataset("small", 100 * KIB, 1000)]
        plan = Plan(seconds=1.5, repeats=1, datasets={d.name: d for d in sets})
    else:
        sets = [
            Dataset("large", 64 * MIB, 6),
            Dataset("medium", 1 * MIB, 200),
            Dataset("small", 100 * KIB, 2000),
        ]
        plan = Plan(seconds=2.5, repeats=3, datasets={d.name: d for d in sets})
    d = plan.datasets
    plan.scenarios += [
        Scenario("nginx 100KiB", "nginx", d["small"], _small(d["small"], False, quick)),
        Scenario("nginx 64MiB", "nginx", d["large"], _large(d["large"], False, quick)),
        Scenario("nginx+30ms 100KiB", "nginx+30ms", d["small"], _latency(quick)),
        Scenario("local 100KiB", "local", d["small"], _local(d["small"], quick)),
        Scenario("local 64MiB", "local", d["large"], _local(d["large"], quick)),
    ]
    if not quick:
        plan.scenarios.insert(
            1, Scenario("nginx 1MiB", "nginx", d["medium"], _small(d["medium"], False, False))
        )
        plan.scenarios += [
            Scenario("seaweedfs 100KiB", "seaweedfs", d["small"], _small(d["small"], True, False)),
            Scenario("seaweedfs 64MiB", "seaweedfs", d["large"], _large(d["large"], True, False)),
        ]
    return plan

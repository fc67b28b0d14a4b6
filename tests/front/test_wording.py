"""What people read says numbers with units, in plain words: the CLI's recommendation, the
wizard's cards and the exported module's comments, rendered over several data sets, with and
without a trial, carry no raw pattern ("(s)", a bare range, a long number without a unit,
"0 min", a decimal size or rate beside binary ones)."""

from __future__ import annotations

import contextlib
import html
import io
import re

import pytest

from advisor import cli
from advisor.core.location import DatasetLocation
from advisor.core.workload import Workload
from advisor.decide.recommend import recommend
from advisor.export import build_export
from advisor.measure.hardware import HardwareProfile
from advisor.measure.profile import DatasetProfile
from advisor.report.headline import headline_lines
from advisor.session import AdvisorSession
from advisor.wizard.evidence import evidence_rows
from advisor.wizard.panels.recommendation import decision_card, headline
from tests import builders
from tests.builders import hardware as _hardware

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12

# Each pattern, and why a person should never read it.
RAW = {
    "a plural left to the reader": re.compile(r"\w\((?:s|es)\)"),
    "a bare range": re.compile(
        r"[(\[]\s*-?[\d.]+(?:e[+-]?\d+)?\s*,\s*-?[\d.]+(?:e[+-]?\d+)?\s*[)\]]"
    ),
    "a long number without a unit or separators": re.compile(r"(?<![\w.,/-])\d{5,}(?![\w.,])"),
    "a duration rounded to nothing": re.compile(r"\b0 (?:min|h)\b"),
    "a decimal size beside binary ones": re.compile(r"\b\d[\d,.]*\s(?:KB|MB|GB|TB|PB)\b(?!/s)"),
    "a decimal rate beside binary sizes": re.compile(r"\b\d[\d,.]*\s(?:KB|MB|GB|TB)/s\b"),
    "a rule's raw unit": re.compile(r"\b(?:local unknown|first-level prefixes)\b"),
}


def raw_patterns(text: str) -> list[str]:
    """Every raw pattern in `text`, with the line it sits on."""
    found = []
    for line in text.splitlines():
        for why, pattern in RAW.items():
            for match in pattern.finditer(line):
                found.append(f"{why}: {match.group(0)!r} in {line.strip()!r}")
    return found


def test_the_patterns_catch_the_old_wording() -> None:
    old = [
        "2 readers (1 rank(s) x workers) need at least 4 shards each",
        "consumer_rate must be in (0, 10000000]",
        "shard_size = 63217510",
        "copying takes about 0 min",
        "17.2 MB gives 2.2 MB shards",
        "local unknown storage",
        "copying it takes about 2.2 ms at about 200 MB/s",
    ]
    assert all(raw_patterns(line) for line in old)
    fine = ["2,079 MiB/s", "241 MiB", "1.3 s", "10,000,000 samples/s", "2 workers", "SRC-2"]
    assert not any(raw_patterns(line) for line in fine)


def _profile(count: int, size: int, fmt: str, uri: str, spo: float | None = None) -> DatasetProfile:
    return builders.profile(count, size, fmt, spo, uri)


RATES = {0: (150.0,), 1: (180.0, 190.0), 2: (350.0, 340.0), 4: (685.0, 705.0)}
SMALL_S3 = "s3://bucket/small-images/"
# (name, profile, hardware, workload, with a trial)
CASES = [
    ("local folder", _profile(300, 57 * KB, "jpeg", "/data/small"), _hardware(2), Workload(),
     False),
    ("local folder, trial", _profile(300, 57 * KB, "jpeg", "/data/small"), _hardware(2),
     Workload(consumer_rate=300), True),
    ("S3 small files", _profile(20_000_000, 100 * KB, "jpeg", SMALL_S3), _hardware(),
     Workload(consumer_rate=1000), False),
    ("S3 small files, many epochs", _profile(300_000, 100 * KB, "jpeg", SMALL_S3), _hardware(),
     Workload(consumer_rate=1000, epochs=10), False),
    ("S3 small files, 16 ranks", _profile(2_000_000, 60 * KB, "jpeg", SMALL_S3),
     _hardware(gpus=8, shm=64 * MB), Workload(consumer_rate=2000, nodes=2, gpus_per_node=8), False),
    ("S3 small set, copy", _profile(200, 150 * MB, "tar", "s3://bucket/shards/", 1000.0),
     _hardware(gpus=1), Workload(consumer_rate=500, epochs=10), True),
    ("S3 large objects", _profile(400, 900 * MB, "npy", "s3://bucket/large/", 1.0),
     _hardware(gpus=1, ram_available=2 * GB), Workload(consumer_rate=20, epochs=3), False),
    ("S3 large objects, trial", _profile(400, 900 * MB, "npy", "s3://bucket/large/", 1.0),
     _hardware(gpus=1), Workload(consumer_rate=20), True),
    ("S3 huge set", _profile(200_000_000, 100 * KB, "jpeg", SMALL_S3), _hardware(),
     Workload(consumer_rate=5000), False),
]  # fmt: skip


def render(
    profile: DatasetProfile, hardware: HardwareProfile, workload: Workload, with_trial: bool
) -> str:
    """Everything a person reads about one recommendation: the CLI's tables and summary, the
    wizard's headline and cards (tags stripped, evidence unfolded) and the exported module's
    docstring and comments."""
    uri = profile.uri
    trial = builders.trial(RATES, uri, profile.sizes.p50, (30, 28)) if with_trial else None
    session = AdvisorSession(
        location=DatasetLocation(uri), workload=workload, profile=profile, hardware=hardware,
        trial=trial,
    )  # fmt: skip
    session.recommendation = rec = recommend(profile, hardware, workload, trial)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli._print_profile(session)
        cli._print_hardware(session)
        if trial is not None:
            cli._print_trial(session)
        cli._print_recommendation(session)
    parts = [out.getvalue()]
    parts += headline_lines(rec, trial, workload.consumer_rate)
    parts.append(headline(rec, trial, workload.consumer_rate))
    for decision in rec.decisions:
        parts.append(decision_card(decision))
        parts += [f"{label}: {value}" for label, value in evidence_rows(decision.evidence)]
    module = build_export(session.location, rec, workload, profile).module_source  # type: ignore[arg-type]
    docstring, _, code = module.partition('"""\n\nfrom __future__')
    parts.append(docstring)
    parts += [line for line in code.splitlines() if line.lstrip().startswith("#")]
    text = "\n".join(parts)
    return html.unescape(re.sub(r"<[^>]+>", "\n", text))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_what_people_read_has_units_and_plain_words(case: tuple) -> None:  # type: ignore[type-arg]
    _, profile, hardware, workload, with_trial = case
    text = render(profile, hardware, workload, with_trial)
    assert raw_patterns(text) == []

"""One figure per quantity: every front renders the same recommendation (a real trial against
SeaweedFS, its copy-local advice's prepare() run, the user's loader compared with the advised
one) and finds the same figure for the copy's time and rate, the model's predicted rate, one
connection's rate and the loop's data wait; a plan for 8 nodes multiplies the copy's figure.

The fronts: the CLI's text (`recommend`'s headline and summary, `diagnose --uri`'s lines), the
JSON (the recommendation's and the before/after's), the wizard's headline and cards (their
evidence rows), the before/after report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import io
import json
import os
import re
import time
from collections.abc import Iterator

import pytest

from advisor import cli
from advisor.before_after import advised_loader, changes
from advisor.core.bounds import LoopLimits
from advisor.core.units import data_rate, duration, mb_per_s, rate
from advisor.core.workload import Workload
from advisor.decide.judged import BeforeAfter
from advisor.decide.recommend import Recommendation, recommend
from advisor.demo.server import S3Endpoint
from advisor.diagnosis import compare
from advisor.report.before_after import before_after_dict, before_after_lines
from advisor.report.headline import headline_lines
from advisor.report.measured import measured_lines
from advisor.report.recommendation import recommendation_summary
from advisor.session import AdvisorSession
from advisor.wizard.panels.recommendation import decision_card, headline, shown_decisions
from native_loader import Credentials

QUICK = LoopLimits(max_batches=30, max_seconds=1.5, batch_timeout_s=20, first_batch_timeout_s=30)
CONSUMER = 400.0  # samples/s: batches of 8 every 20 ms
_NUMBER = r"[\d.,]+"
_TIME = rf"{_NUMBER} (?:µs|ms|s|min)"


class SlowBatches:
    """The user's loader: batches of 8 that each take 20 ms to load, in the main process."""

    def __iter__(self) -> Iterator[list[bytes]]:
        for _ in range(10_000):
            time.sleep(0.02)
            yield [bytes(1000)] * 8


@dataclasses.dataclass(frozen=True)
class Fronts:
    session: AdvisorSession
    result: BeforeAfter
    cli_text: str


def _text(value: str) -> str:
    """HTML as its text: tags dropped, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", " ", value))


def _wizard(rec: Recommendation, fronts: Fronts | None = None) -> str:
    """The wizard's headline and its cards (each with its evidence rows), as text."""
    cards = "".join(decision_card(d) for d in shown_decisions(rec, True))
    if fronts is None:
        return _text(cards)
    r, session = fronts.result, fronts.session
    top = headline(rec, session.trial, CONSUMER, r.comparison.before[0], r.changed, r.comparison)
    return _text(top + cards)


def _every_front(fronts: Fronts) -> dict[str, str]:
    r = fronts.result
    return {
        "cli recommend": fronts.cli_text,
        "cli diagnose --uri": "\n".join(before_after_lines(r)),
        "json recommendation": r.recommendation.to_json(),
        "json before/after": json.dumps(before_after_dict(r), ensure_ascii=False),
        "wizard": _wizard(r.recommendation, fronts),
    }


@pytest.fixture(scope="module")
def fronts(s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fronts]:
    """The wizard's path, as a user walks it: the trial, the advice, the advised loader's copy
    made by its prepare(), the user's loader against the advised one in the same loop."""
    home = tmp_path_factory.mktemp("home")
    scratch = tmp_path_factory.mktemp("export")
    client, bucket = s3_endpoint.boto3_client(), f"one-figure-{os.getpid()}"
    client.create_bucket(Bucket=bucket)
    for i in range(48):
        client.put_object(Bucket=bucket, Key=f"data/{i:03d}.bin", Body=bytes(20_000))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))  # the copy lands in this home's cache
        patch.setenv("LOADER_ADVISOR_DEMO_CACHE", str(home / ".cache" / "loader-advisor" / "demo"))
        keys = s3_endpoint.credentials
        session = AdvisorSession()
        session.set_location(
            f"s3://{bucket}/data/", endpoint_url=s3_endpoint.url,
            credentials=Credentials(keys.access_key, keys.secret_key),
        )  # fmt: skip
        session.set_workload(Workload(consumer_rate=CONSUMER, batch_size=8))
        session.run_trial(6)
        first = session.run_recommend()
        assert first.data_source == "copy-local", first.path()
        exported, copy = advised_loader(session, scratch)
        comparison = compare(
            SlowBatches(), exported, consumer_rate=CONSUMER, limits=QUICK, rounds=2
        )
        rec = session.recommendation
        assert rec is not None and copy is not None and copy.report is not None
        result = BeforeAfter(
            comparison.before[0], rec, comparison, changes(SlowBatches(), rec, copy), copy
        )
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # what `recommend` and `trial` print
            cli._print_recommendation(session)
            cli._print_measured(session)
        yield Fronts(session, result, printed.getvalue())
    client.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": f"data/{i:03d}.bin"} for i in range(48)]}
    )
    client.delete_bucket(Bucket=bucket)


def test_the_copy_has_one_figure_in_every_front_the_prepare_that_ran(fronts: Fronts) -> None:
    """The copy's rate and time are its prepare()'s wherever they are said: the before/after's
    first change, the data source card, the start-up note, the CLI and the JSON."""
    report = fronts.result.copy.report if fronts.result.copy else None
    assert report is not None and report.copied_bytes == report.bytes == 48 * 20_000
    copy_rate, copy_time = data_rate(report.bytes_per_s), duration(report.seconds)
    said_rates, said_times = [], []
    for front, text in _every_front(fronts).items():
        rates = re.findall(rf"at the measured ({_NUMBER} (?:[KMG]i)?B/s)", text)
        times = re.findall(rf"first \(({_TIME}) at the measured", text)
        times += re.findall(rf"copying it takes about ({_TIME})", text)
        times += re.findall(rf"takes about ({_TIME}) before the first batch", text)
        assert rates and times, (front, text)
        said_rates += [(front, r) for r in rates]
        said_times += [(front, t) for t in times]
    assert {r for _, r in said_rates} == {copy_rate}, said_rates
    assert {t for _, t in said_times} == {copy_time}, said_times
    # the figures behind them: the card's evidence and the before/after's record agree
    source = fronts.result.recommendation.decision("data_source").evidence
    assert source["copy_bytes_per_s"] == round(report.bytes_per_s)
    assert before_after_dict(fronts.result)["local_copy"]["bytes_per_s"] == round(
        report.bytes_per_s
    )


def test_a_plan_for_8_nodes_multiplies_the_copys_figure(fronts: Fronts) -> None:
    """With 8 nodes and a storage limit of 150 GET/s, each node copies every object: 8 passes
    over S3 and 8 x the GETs; the copies' request rate and their unthrottled time are the
    copy's figure (its prepare()'s), not the storage's peak rate."""
    session = fronts.session
    assert session.profile is not None and session.hardware is not None
    workload = dataclasses.replace(session.workload, nodes=8, get_limit=150.0)
    plan = recommend(
        session.profile, session.hardware, workload, session.trial,
        local_copy=session.local_copy,
    )  # fmt: skip
    assert plan.data_source == "copy-local", plan.path()
    report = session.local_copy
    assert report is not None
    copy_time = duration(report.seconds)
    cost = plan.decision("cost")
    assert cost.evidence["get_requests"] == 8 * 48
    assert "one copy per node: 8 passes over S3" in cost.rationale, cost.rationale
    assert f"instead of {copy_time}." in cost.rationale, cost.rationale
    assert cost.evidence["unthrottled_copy_s"] == round(report.seconds, 1)
    # 8 nodes copying 48 objects each at the copy's rate ask 8 x 48 / its seconds GET/s
    asked = cost.evidence["get_per_s"]
    assert asked == pytest.approx(8 * 48 / report.seconds, rel=0.01)
    job = plan.decision("job")
    assert f"about {copy_time} at the measured {data_rate(report.bytes_per_s)}" in job.rationale
    assert job.evidence["first_batch_gets"] == 8 * 48


def _planned(fronts: Fronts, consumer_rate: float = CONSUMER) -> Recommendation:
    """The same advice planned for a machine with an A100 (this host's cores, RAM and disk):
    the model decides num_workers there (NW-4), from the costs the trial measured here."""
    session = fronts.session
    assert session.profile is not None and session.hardware is not None
    planned = session.hardware.with_target_gpu("A100-80GB", 1)
    workload = dataclasses.replace(session.workload, consumer_rate=consumer_rate)
    return recommend(
        session.profile, planned, workload, session.trial, local_copy=session.local_copy
    )


def _predicted(text: str) -> set[str]:
    """Every predicted samples/s a text says, wherever the prediction is named."""
    figure = rf"({_NUMBER} samples/s)"
    found = re.findall(rf"(?:[Pp]redicts?|[Pp]redicted)\s+{figure}", text)
    found += re.findall(rf"{figure} \(predicted", text)
    return set(found)


def test_the_models_prediction_is_one_figure_in_the_workers_and_throughput_cards(
    fronts: Fronts,
) -> None:
    """Planned for another machine (the model decides num_workers) and a GPU slower than the
    loader (20 samples/s: a loader reads these 20 KB objects many times faster), the
    num_workers card and the throughput card give the one predicted rate training sees at
    the chosen count (the loader through the step), in their words and in their evidence
    rows, the CLI's summary and headline alike; the loader's own rate is named as such."""
    rec = _planned(fronts, consumer_rate=20.0)
    assert "NW-4" in rec.decision("num_workers").rules, rec.path()
    figure = rate(rec.predicted_samples_per_s)
    workers, throughput = rec.decision("num_workers"), rec.decision("throughput")
    said = headline_lines(rec, fronts.session.trial, 20.0)  # the CLI's and the wizard's
    for text in (
        workers.rationale,
        throughput.rationale,
        _wizard(rec),
        recommendation_summary(rec),
        "\n".join(said),
    ):
        assert _predicted(text) == {figure}, text
    chosen = str(rec.num_workers)
    assert workers.evidence["predicted_samples_per_s"][chosen] == pytest.approx(
        throughput.evidence["predicted_samples_per_s"], abs=0.05
    )
    loader = workers.evidence["loader_samples_per_s"][chosen]  # what the choice weighs
    assert loader > 1.2 * 20.0 > rec.predicted_samples_per_s, (loader, figure)
    assert f"their loader alone would deliver {rate(loader)}" in workers.rationale
    # and on this machine: the measured card's model figure is the throughput card's; a
    # measured loop's own advised change (the user's loader with more workers, say) is another
    # thing the model predicts, said as that change's one figure
    r = fronts.result
    here = r.recommendation
    loops = (r.first_look, *r.comparison.before, *r.comparison.after)
    changes = {rate(j.change.predicted_samples_per_s) for j in loops if j.change is not None}
    for front, text in _every_front(fronts).items():
        assert _predicted(text) <= {rate(here.predicted_samples_per_s)} | changes, front


def test_one_connection_has_one_figure_and_a_local_read_its_own_label(fronts: Fronts) -> None:
    """The S3 probe's one connection reads the same wherever it is said; what the local copy
    read is labelled as the copy's reads, never as a connection."""
    trial = fronts.session.trial
    assert trial is not None and trial.storage is not None and trial.copy_storage is not None
    one = mb_per_s(trial.storage.per_connection_mb_s)
    assert f"storage, one connection: {one}" in measured_lines(trial, on_s3=True, records=False)
    planned = _planned(fronts)  # its cards give the storage's figures the model plans with
    texts = {
        **_every_front(fronts),
        "planned, wizard": _wizard(planned),
        "planned, cli": recommendation_summary(planned),
        "planned, json": planned.to_json(),
    }
    for front, text in texts.items():
        said = re.findall(rf"(?:one|per) connection:?\s+({_NUMBER} (?:[KMG]i)?B/s)", text, re.I)
        said += re.findall(rf"({_NUMBER} (?:[KMG]i)?B/s) per connection", text)
        assert set(said) <= {one}, (front, said)


def test_the_data_wait_beside_a_comparison_is_its_figure_or_labelled(fronts: Fronts) -> None:
    """Beside the comparison's data wait (the medians of its interleaved rounds), a line that
    quotes another run's wait (a bottleneck from the first round, or from the first look on
    its own) says which run it is: the before/after report and the wizard's headline alike."""
    r = fronts.result
    pooled = [r.comparison.pooled(k, "overall_wait_share") for k in ("before", "after")]
    theirs = {f"{w.median * 100:.0f}%" for w in pooled if w is not None}
    assert len(pooled) == 2 and theirs
    report = before_after_lines(r)
    wizard = headline_lines(
        r.recommendation, fronts.session.trial, CONSUMER, r.comparison.before[0], r.changed,
        r.comparison,
    )  # fmt: skip
    quoted = 0
    for line in report[: report.index("")] + wizard:
        if "bottleneck" in line and "% of" in line:
            quoted += 1
            assert "first interleaved round" in line or "on its own" in line, line
        elif "of each step" in line:
            said = set(re.findall(r"(\d+%)(?: \([^)]*\))? of each step", line))
            said |= set(re.findall(r"data wait (\d+%) ->", line))
            assert said and said <= theirs, (theirs, line)
    assert quoted >= 1, (report, wizard)  # the user's loader waits: its bottleneck says how long


def test_watch_labels_the_whole_run_beside_its_proof() -> None:
    """`advisor.watch`'s last line gives the whole run's rate, labelled as such (the proof's
    figure covers the steps after the swap)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import advisor

    lines: list[str] = []
    for _ in advisor.watch(DataLoader(TensorDataset(torch.arange(80)), batch_size=4), every=50,
                           out=lines.append):  # fmt: skip
        pass
    run = [line for line in lines if " steps, " in line]
    assert run and all("samples/s over the whole run" in line for line in run), lines

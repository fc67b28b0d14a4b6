"""The Recommendation step: the headline, the decision cards, the supply chart and the
decision-flow diagram with the path taken."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from advisor.decide.recommend import Decision
from advisor.measure.trial.results import summarise
from advisor.wizard import charts, flow
from tests.wizard.conftest import WIDGET_WARNINGS, loader_slice

pytestmark = WIDGET_WARNINGS


def test_throughput_chart_skips_unknowns() -> None:
    figure = charts.throughput_chart(500.0, None, 450.0)
    assert list(figure.data[0].x) == ["loader (expected)", "loader (best measured)"]
    packed = charts.throughput_chart(500.0, None, 450.0, "a packed sample")
    assert list(packed.data[0].x)[1] == "loader (best measured on a packed sample)"


def test_figure_bundle_is_plotly_mime() -> None:
    bundle = charts.figure_bundle(charts.throughput_chart(1.0, 2.0))
    spec = bundle["data"]["application/vnd.plotly.v1+json"]
    assert spec["data"][0]["type"] == "bar" and spec["config"]["displaylogo"] is False


def test_flow_highlights_the_path() -> None:
    source = "flowchart TD\n  SRC1 --> W1\n  W1 --> P2\n"
    text = flow.flow_markdown(["SRC1", "W1", "NOPE"], source)
    assert text.startswith("```mermaid\nflowchart TD")
    assert "class SRC1,W1 taken" in text and "classDef taken" in text


def test_packaged_diagram_is_the_one_in_the_docs() -> None:
    """docs/decision-flow.md embeds the diagram the wizard ships; edit both together."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "decision-flow.md"
    assert flow.mermaid_source(doc.read_text(encoding="utf-8")) == flow.diagram_source()
    assert flow.flow_mermaid(["SRC-1"]).endswith("class SRC-1 taken\n")


def test_a_missing_diagram_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flow, "DIAGRAM_RESOURCE", "no-such-diagram.mmd")
    with pytest.raises(flow.DiagramMissingError, match="reinstall"):
        flow.flow_bundle(["SRC-1"])


def test_headline_names_the_reader_setting_when_streaming() -> None:
    from advisor.wizard.panels.recommendation import headline

    rec = SimpleNamespace(
        data_source="stream",
        sagemaker_input_mode="FastFile",
        input_bound=None,
        notes=(),
        cost_notes=(),
        decisions=(Decision("requests_in_flight", 96, "Little's law", ("RD-1",)),),
        requests_in_flight=96,
        num_workers=2,
        pin_memory=True,
        prefetch_factor=None,
        expected_samples_per_s=500.0,
        dataloader_kwargs=lambda: {"num_workers": 2},
    )
    shown = headline(rec, None, None)  # type: ignore[arg-type]
    assert "ReaderConfig(max_inflight_requests=96)</code> per worker" in shown
    copied = SimpleNamespace(**{**vars(rec), "data_source": "copy-local", "decisions": ()})
    assert "ReaderConfig" not in headline(copied, None, None)  # type: ignore[arg-type]


def test_the_workers_card_shows_the_measured_table_beside_the_model() -> None:
    from advisor.wizard.panels.recommendation import decision_card

    table = {
        "0": {
            "median": 410.0,
            "low": 400.0,
            "high": 420.0,
            "lower_bound": False,
            "predicted": 450.0,
        },
        "1": {"median": 90.0, "low": 80.0, "high": 95.0, "lower_bound": True, "predicted": 380.0},
    }
    decision = Decision(
        "num_workers", 0, "0 worker(s): the best measured.", ("NW-3",),
        {"sweep_table": table, "prediction_error": 0.098}, "high", True,
    )  # fmt: skip
    card = decision_card(decision)
    assert "<table class='la-table la-sweep'>" in card
    assert "<td>0</td><td>410 samples/s</td><td>400-420</td><td>450 samples/s</td>" in card
    assert "<td>1</td><td>at least 90.0 samples/s</td><td>80.0-95.0</td>" in card  # a lower bound
    assert "<th>Prediction error</th><td>10%</td>" in card and "sweep_table" not in card
    assert "<details class='la-details'><summary>evidence</summary>" in card  # folded


def test_no_s3_only_cards_for_a_local_folder() -> None:
    from advisor.wizard.panels.recommendation import shown_decisions

    decisions = tuple(
        Decision(name, 1, "why", ("R-1",))
        for name in ("num_workers", "shard_size", "requests_in_flight", "prefix_layout")
    )
    rec = SimpleNamespace(decisions=decisions, applies=lambda d: True)
    assert [d.name for d in shown_decisions(rec, is_s3=False)] == ["num_workers"]  # type: ignore[arg-type]
    assert len(shown_decisions(rec, is_s3=True)) == 4  # type: ignore[arg-type]


def test_headline_gives_the_measured_wait_at_the_recommended_count() -> None:
    from advisor.report.headline import headline_lines

    rec = SimpleNamespace(num_workers=2, pin_memory=True, prefetch_factor=2, data_source="stream",
                          expected_samples_per_s=400.0, measured_samples_per_s=255.0)  # fmt: skip
    trial = SimpleNamespace(counts=summarise([loader_slice(2, 255), loader_slice(0, 31)]))
    lines = headline_lines(rec, trial, 300.0)  # type: ignore[arg-type]
    assert (
        lines[0] == "Change: DataLoader(num_workers=2, pin_memory=True, prefetch_factor=2), "
        "reading from stream."
    )
    assert lines[1] == (
        "Measured at num_workers=2: 255 samples/s of the 300 samples/s one GPU consumes: "
        "the training waits for data 15% of each step."
    )
    bounded = SimpleNamespace(counts=summarise([loader_slice(2, 150, steady=False)]))
    assert headline_lines(rec, bounded, 300.0)[1].endswith(  # type: ignore[arg-type]
        "at least 150 samples/s of the 300 samples/s one GPU consumes: the training waits for "
        "data at most 50% of each step."
    )
    untried = headline_lines(rec, None, 300.0)  # type: ignore[arg-type]
    assert "not measured" in untried[1]
    # the model decided (the trial read the listed objects, training reads something else):
    # the trial's figure at that count is not what training will get
    modelled = SimpleNamespace(**{**vars(rec), "measured_samples_per_s": None})
    predicted = headline_lines(modelled, trial, 300.0)  # type: ignore[arg-type]
    assert predicted[1] == (
        "Expected at num_workers=2: 400 samples/s (predicted: the trial did not read what "
        "training will read; see num_workers)."
    )


def test_headline_with_the_users_loader_measured() -> None:
    from advisor.report.headline import headline_lines

    rec = SimpleNamespace(num_workers=2, pin_memory=True, prefetch_factor=2, data_source="stream",
                          expected_samples_per_s=400.0, measured_samples_per_s=290.0)  # fmt: skip
    trial = SimpleNamespace(counts=summarise([loader_slice(2, 290)]))
    spread = SimpleNamespace
    diagnosis = SimpleNamespace(
        summary=SimpleNamespace(  # the whole run's figures lead; the windows give the range
            overall_samples_per_s=31.0,
            overall_wait_share=0.78,
            samples_per_s=spread(median=35.0),
            wait_share=spread(median=0.7),
        ),
        verdict=None,
    )
    lines = headline_lines(
        rec, trial, 300.0, diagnosis, ("num_workers 0 -> 2", "the native reader")
    )  # type: ignore[arg-type]
    assert lines[0] == "Change: num_workers 0 -> 2, the native reader."
    assert lines[1].startswith(
        "Your loader 31.0 -> 290 samples/s, data wait 78% -> 3% of each step"
    )


def test_headline_leads_with_both_loaders_in_the_same_loop() -> None:
    """Compared (the user's loader and the exported one, interleaved), the headline gives
    their before, after and ratio, not the trial's figure; then the user's bottleneck."""
    from advisor.decide.bottleneck import Bottleneck
    from advisor.diagnosis import Comparison
    from advisor.report.headline import headline_lines

    def run(rate: float, waits: float) -> Any:
        summary = SimpleNamespace(overall_samples_per_s=rate, overall_wait_share=waits)
        return SimpleNamespace(summary=summary, verdict=None, bottleneck=None)

    rec = SimpleNamespace(num_workers=2, pin_memory=True, prefetch_factor=2, data_source="stream",
                          expected_samples_per_s=400.0, measured_samples_per_s=290.0,
                          bottleneck=None)  # fmt: skip
    trial = SimpleNamespace(counts=summarise([loader_slice(2, 290)]))
    comparison = Comparison(
        (run(31.0, 0.78), run(33.0, 0.76)), (run(130.0, 0.03), run(128.0, 0.04))
    )
    limit = Bottleneck("storage", 31.0, (), "78% of each step waits", "loop")
    mine = SimpleNamespace(summary=comparison.before[0].summary, verdict=None, bottleneck=limit)
    lines = headline_lines(
        rec, trial, 300.0, mine, ("num_workers 0 -> 2", "the native reader"), comparison
    )  # type: ignore[arg-type]
    assert lines[0] == "Change: num_workers 0 -> 2, the native reader."
    assert lines[1].startswith(
        "Your loader -> the recommended one, in your loop: 32.0 -> 129 samples/s (4.0"
    )
    assert "data wait 77% -> 4% of each step" in lines[1] and "290" not in lines[1]
    # its figure is its first round's, not the rounds' median above: labelled as such
    assert lines[-1] == (
        "Your loader's bottleneck: storage: 78% of each step waits (its first interleaved round)."
    )

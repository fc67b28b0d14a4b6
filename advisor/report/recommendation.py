"""The recommendation as plain text for a terminal (`python -m advisor recommend`): the
settings, the throughput, each decision with its reasons, the rules on the path taken."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.units import counted, data_size, rate

if TYPE_CHECKING:
    from advisor.decide.recommend import Recommendation


def recommendation_summary(rec: Recommendation) -> str:
    """A few plain lines for a terminal: the settings, the throughput, the reasons."""
    kwargs = ", ".join(f"{k}={v!r}" for k, v in rec.dataloader_kwargs().items())
    kind = "measured" if rec.measured_samples_per_s is not None else "predicted"
    expected = f"{rate(rec.expected_samples_per_s)} ({kind})"
    if rec.consumer_rate is not None:
        verdict = "input-bound" if rec.input_bound else "keeps up"
        expected += f" against {rate(rec.consumer_rate)} consumed: {verdict}"
    shown = {d.name for d in rec.shown_decisions()}
    lines = [f"data source:  {rec.source_words()}", f"DataLoader:   {kwargs}"]
    if "requests_in_flight" in shown:  # read from S3: the native reader's settings
        lines.append(
            f"reader:       max_inflight_requests={rec.requests_in_flight}, "
            f"max_inflight_bytes={data_size(rec.inflight_bytes)} per process"
        )
    if "shard_size" in shown:
        lines.append(
            f"shards:       {data_size(rec.shard_size_bytes)} over "
            f"{counted(rec.prefix_count, 'prefix', 'prefixes')}"
        )
    lines.append(f"throughput:   {expected}")
    if rec.bottleneck is not None:
        lines.append(f"bottleneck:   {rec.bottleneck.words}: {rec.bottleneck.reason}")
    lines.append("")
    for d in rec.shown_decisions():  # the decision and why first; its rules after
        folder = d.name == "data_source" and rec.reads_folder_in_place
        lines.append(f"{d.name} = {rec.source_words() if folder else d.display}")
        lines.append(f"  {d.rationale}")
        rules = ", ".join(d.rules) or "none"
        lines.append(f"  ({d.confidence} confidence; rules: {rules})")
    lines += [f"note: {n}" for n in rec.notes]
    lines.append(f"rules on the path taken: {' -> '.join(rec.fired_rules)}")
    return "\n".join(lines)

"""The recommendation as plain text for a terminal (`python -m advisor recommend`): the
settings, the throughput, each decision with its reasons, the rules on the path taken; and a
decision's label and value as the wizard's cards and the export's comments show them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.units import counted, data_size, rate

if TYPE_CHECKING:
    from advisor.decide.recommend import Decision, Recommendation


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


# How people read a decision's name; DataLoader arguments keep theirs (they are what to type).
_DECISION_LABELS = {
    "data_source": "read from", "requests_in_flight": "requests in flight",
    "inflight_bytes": "bytes in flight", "shard_size": "shard size",
    "prefix_layout": "key prefixes", "throughput": "expected throughput",
    "preprocess": "preprocessing", "cost": "cost",
}  # fmt: skip
_BYTE_DECISIONS = frozenset({"shard_size", "inflight_bytes"})


def decision_label(decision: Decision) -> str:
    """A decision's name as people read it: the export's comments and the wizard's cards."""
    return _DECISION_LABELS.get(decision.name, decision.name)


def decision_value(decision: Decision) -> str:
    """The decided value for people, its size in the one unit system (advisor.core.units)."""
    value = decision.value
    if decision.name == "data_source" and "SRC-2" in decision.rules:  # a folder on this machine
        return "the folder, in place"
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
    if decision.name == "preprocess" and value == "cpu":  # DEC-1: nothing else gains
        return "decode on the CPU, as now (no change)"
    return decision.display

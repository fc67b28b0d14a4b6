"""The decision rules, one small class per rule, grouped by family, in the order of
docs/decision-flow.md.

- `keys`: `Key` (the decided values), `DecisionKind` (the reported decisions, their units and
  formats), `Finding` and its `Confidence`; `base`: `Rule` (a rule's text is its docstring);
- `context`: `Context`, the facts every rule may read, on `reading`'s `Reading` (the inputs,
  where the data is, what training reads and whether the trial read it); `evidence`: the
  trial's sweep as evidence; `readpath`: what the num_workers decision says about the read path;
- `thresholds`: every threshold with its source; `bottleneck`: what limits the loader, named
  from the measurements (the recommendation and the diagnosis report it, MEAS-4 heeds it);
- the families, each importing only those shared modules: `source` (data source), `reader`
  (native reader settings), `workers` (num_workers), `batches` (prefetch, /dev/shm, pinning),
  `layout` (shards and prefixes), `throughput`, `cost`;
- `registry`: `RULES` in flow order and `evaluate`, which runs them; `doc`: writes the rules
  table of docs/decision-flow.md from the docstrings (``python -m advisor.decide.rules.doc``).
"""

from advisor.decide.rules.base import Rule
from advisor.decide.rules.context import Context
from advisor.decide.rules.keys import Confidence, DecisionKind, Finding, Key, State
from advisor.decide.rules.registry import FAMILIES, RULES, Evaluation, evaluate, rule_by_id
from advisor.decide.rules.thresholds import HEADROOM, SHARD_MAX_BYTES, SHARD_MIN_BYTES, TOLERANCE

__all__ = [
    "FAMILIES",
    "HEADROOM",
    "RULES",
    "SHARD_MAX_BYTES",
    "SHARD_MIN_BYTES",
    "TOLERANCE",
    "Confidence",
    "Context",
    "DecisionKind",
    "Evaluation",
    "Finding",
    "Key",
    "Rule",
    "State",
    "evaluate",
    "rule_by_id",
]

"""The decision rules, one small class per rule, grouped by family, in the order of
docs/decision-flow.md.

- `base`: `Rule` (a rule's text is its docstring); the rules read `advisor.decide.facts`
  (`Context` and what it derives) and the deciding vocabulary (`advisor.decide.keys`,
  `thresholds`, `words`, `bottleneck`);
- the families: `source` (data source), `reader` (native reader settings), `workers`
  (num_workers), `batches` (prefetch, /dev/shm, pinning), `layout` (shards and prefixes),
  `throughput`, `placement`, `cost`, `plan` (the job and the machine it runs on);
- `registry`: `RULES` in flow order and `evaluate`, which runs them; `doc`: writes the rules
  table of docs/decision-flow.md from the docstrings (``python -m advisor.decide.rules.doc``).
"""

from advisor.decide.facts.context import Context
from advisor.decide.keys import Confidence, DecisionKind, Finding, Key, State
from advisor.decide.rules.base import Rule
from advisor.decide.rules.registry import FAMILIES, RULES, Evaluation, evaluate, rule_by_id
from advisor.decide.thresholds import HEADROOM, SHARD_MAX_BYTES, SHARD_MIN_BYTES, TOLERANCE

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

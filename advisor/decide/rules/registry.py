"""The registry: every rule in the order of docs/decision-flow.md, and the loop that runs them.

Rules run top to bottom. A rule whose key an earlier rule has already set is skipped (first match
wins, as in the doc's flow); advisory rules (key None) only add notes and always run.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from advisor.decide.facts.context import Context
from advisor.decide.keys import Finding, Key
from advisor.decide.rules import (
    batches,
    cost,
    layout,
    placement,
    plan,
    reader,
    source,
    throughput,
    workers,
)
from advisor.decide.rules.base import Rule

FAMILIES = (source, reader, workers, batches, layout, throughput, placement, cost, plan)

RULES: tuple[Rule, ...] = (
    source.DataAlreadyOnSharedFs(),
    source.DataAlreadyLocal(),
    source.VeryLargeSharedSet(),
    source.ManySmallFiles(),
    source.SmallSetCopyLocal(),
    source.StreamFromS3(),
    source.AfterReshard(),
    source.EfsThroughput(),
    source.CacheAfterFirstEpoch(),
    reader.ReaderRequestsInFlight(),
    reader.ReaderBytesInFlight(),
    workers.WorkersCappedByCores(),
    workers.WorkersCappedByRam(),
    workers.WorkersFromSweep(),
    workers.WorkersFromModel(),
    workers.WorkersBalanceShards(),
    batches.NoPrefetchWithoutWorkers(),
    batches.PrefetchHidesLatency(),
    batches.SharedMemoryTooSmall(),
    batches.NoGpuNoPin(),
    batches.PinnedNotFaster(),
    batches.LowRamNoPin(),
    batches.PinForGpu(),
    layout.FewShardsPerReader(),
    layout.PackSmallObjects(),
    layout.SplitHugeObjects(),
    layout.SpreadPrefixes(),
    layout.KeepShardSize(),
    layout.KeepPrefixes(),
    throughput.MeasuredThroughput(),
    throughput.ModelThroughput(),
    throughput.InputBound(),
    throughput.CpuBoundDecode(),
    placement.DecodePlacement(),
    cost.GetRequestCost(),
    cost.StartupTime(),
    cost.IdleGpuCost(),
    cost.SharedFsStorageCost(),
    cost.IdleReaders(),
    cost.StorageRequestLimit(),
    cost.CopyRequestLimit(),
    plan.JobPlan(),
    plan.NodeNetwork(),
    plan.PlanRestsOn(),
)


def rule_by_id(rule_id: str) -> Rule:
    for rule in RULES:
        if rule.id == rule_id:
            return rule
    raise KeyError(rule_id)


@dataclass(frozen=True)
class Evaluation:
    """What the registry concluded: the decided values, and the findings in flow order."""

    state: dict[Key, Any]
    findings: tuple[Finding, ...]  # the findings that set a value
    advisories: tuple[Finding, ...]  # the notes that set none
    path: tuple[str, ...]  # the ids of every rule that fired, in registry order

    @property
    def fired(self) -> tuple[Finding, ...]:
        """Every finding, decided and advisory, in registry order."""
        both = self.findings + self.advisories
        return tuple(sorted(both, key=lambda f: self.path.index(f.rule_id)))


def evaluate(ctx: Context, rules: tuple[Rule, ...] = RULES) -> Evaluation:
    """Run `rules` in order; a rule whose key is already decided is skipped."""
    state: dict[Key, Any] = {}
    findings: list[Finding] = []
    advisories: list[Finding] = []
    path: list[str] = []
    for rule in rules:
        if rule.key is not None and rule.key in state:
            continue
        found = rule.evaluate(ctx, MappingProxyType(state))
        if found is None:
            continue
        path.append(found.rule_id)
        if found.key is None:
            advisories.append(found)
        else:
            state[found.key] = found.value
            findings.append(found)
    return Evaluation(state, tuple(findings), tuple(advisories), tuple(path))

"""Scoring the policies of an adaptive evaluation at each held-out condition: the oracle
(the candidate with the lowest objective there), each policy's pick and its regret (%),
and a policy's accuracy, regret and confusion over all conditions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgetwin.comparison import relative_pct
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.number_text import exact_text
from edgetwin.policies.adaptive import Objective, SelectionPolicy
from edgetwin.policies.perf_map import Estimate, PerformanceMap

TIE_PCT = 1e-9  # a pick this close to the oracle's objective counts as correct


# batch, bandwidth_mbps, devices up, tokens, output tokens (None: an encoder)
ConditionKey = tuple[int, float, int, int, int | None]


@dataclass(frozen=True)
class Choice:
    """What a policy picked at a condition and how it turned out in the twin."""

    label: str
    cost: float
    regret_pct: float


@dataclass(frozen=True)
class ConditionResult:
    """One held-out condition: the twin's value of every candidate, the oracle, the picks."""

    batch: int
    bandwidth_mbps: float
    devices: int  # how many are up; truth holds every candidate on at most that many
    tokens: int  # a decoder's: prompt tokens
    in_map: bool
    truth: dict[str, Estimate]
    oracle: str
    oracle_cost: float
    choices: dict[str, Choice]
    best_in_map: Choice  # the best candidate the map profiled; its regret: the map's gap
    output_tokens: int | None = None  # a decoder's

    def distributed_wins(self, policy: str | None) -> bool:
        """Whether the oracle (policy None) or the policy picked a distributed candidate."""
        label = self.oracle if policy is None else self.choices[policy].label
        return label != baseline_label()


@dataclass(frozen=True)
class PolicyScore:
    """A policy over all held-out conditions."""

    decision_accuracy: float
    mode_accuracy: float
    mean_regret_pct: float
    max_regret_pct: float
    confusion: dict[str, dict[str, int]]  # oracle label -> chosen label -> count


def baseline_label() -> str:
    """The label of the registry's baseline candidate (single)."""
    return registry.candidate_label(registry.baseline().name)


def condition_text(key: ConditionKey) -> str:
    """``batch 8, 600 Mbit/s, 4 devices up, 197 tokens`` (and ``, 32 output tokens``)."""
    batch, bw, devices, tokens, output = key
    outputs = "" if output is None else f", {output} output tokens"
    return f"batch {batch}, {exact_text(bw)} Mbit/s, {devices} devices up, {tokens} tokens{outputs}"


def regret_pct(cost: float, oracle_cost: float) -> float:
    """How much worse (%) a pick's objective is than the oracle's (0 when it is the oracle)."""
    if cost == oracle_cost:
        return 0.0
    return relative_pct(cost, oracle_cost)


def score_condition(
    key: ConditionKey,
    truth: dict[str, Estimate],
    perf_map: PerformanceMap,
    objective: Objective,
    policies: dict[str, SelectionPolicy],
    files: tuple[Path | None, Path | None],
) -> ConditionResult:
    """The oracle, each policy's pick and the best profiled candidate at one condition;
    ``files``: the map table and the evaluation file, named by errors (None: not known)."""
    map_table, settings_path = files
    batch, bw, devices, tokens, output = key
    baseline = truth[baseline_label()]
    costs = {label: objective.cost(value, baseline) for label, value in truth.items()}
    oracle = min(costs, key=costs.__getitem__)
    picks = {}
    for name, policy in policies.items():
        try:
            picks[name] = policy.choose(batch, bw, devices, tokens, output).label
        except ValueError as exc:
            raise InputError(settings_path or map_table, "policies", f"{name}: {exc}") from None
        if picks[name] not in costs:
            where = condition_text(key)
            raise InputError(map_table, None, f"{name} picked {picks[name]}, not run at {where}")
    profiled = [label for label in costs if label in {c.label for c in perf_map.candidates}]
    best = min(profiled, key=costs.__getitem__)
    in_map = (
        batch in perf_map.batches
        and bw in perf_map.bandwidths_mbps
        and tokens in perf_map.tokens
        and devices in perf_map.devices
        and (output is None or output in (perf_map.output_tokens or ()))
    )

    def choice(label: str) -> Choice:
        return Choice(label, costs[label], regret_pct(costs[label], costs[oracle]))

    choices = {name: choice(label) for name, label in picks.items()}
    return ConditionResult(
        *(batch, bw, devices, tokens, in_map, truth, oracle, costs[oracle], choices, choice(best)),
        output,
    )


def score_policy(name: str, conditions: Sequence[ConditionResult]) -> PolicyScore:
    """Accuracy, regret and confusion matrix of policy ``name`` over ``conditions``."""
    regrets = [c.choices[name].regret_pct for c in conditions]
    correct = [
        c.choices[name].label == c.oracle or regret <= TIE_PCT
        for c, regret in zip(conditions, regrets, strict=True)
    ]
    same_mode = [c.distributed_wins(None) == c.distributed_wins(name) for c in conditions]
    confusion: dict[str, dict[str, int]] = {}
    for c in conditions:
        row = confusion.setdefault(c.oracle, {})
        row[c.choices[name].label] = row.get(c.choices[name].label, 0) + 1
    return PolicyScore(
        decision_accuracy=sum(correct) / len(conditions),
        mode_accuracy=sum(same_mode) / len(conditions),
        mean_regret_pct=sum(regrets) / len(regrets),
        max_regret_pct=max(regrets),
        confusion=confusion,
    )


def map_gap(conditions: Sequence[ConditionResult]) -> dict[str, float]:
    """Mean and max regret (%) of the best candidate the map profiled: the part of any
    map policy's regret that comes from what the map lacks (e.g. a device count)."""
    gaps = [c.best_in_map.regret_pct for c in conditions]
    return {
        "map_gap_mean_pct": round(sum(gaps) / len(gaps), 6),
        "map_gap_max_pct": round(max(gaps), 6),
    }

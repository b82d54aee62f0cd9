"""Deployment selection at run time: single device, or distributed with the best CR.

One interface for every selection policy: given the observed batch,
bandwidth and sequence length (tokens; optional when the map has one; a
decoder's prompt tokens, and its output tokens) and optionally how many
devices are up, a policy names a candidate of the
performance map and the latency and energy the map expects for it. With N
devices up a policy may deploy on any profiled device count <= N (a subset of
the devices that are up) or on one; more up than the map's largest count
means the largest (unprofiled counts are not extrapolated). Policies are
registered by name:

- ``adaptive``: the candidate with the lowest objective, each candidate's
  latency and energy interpolated from the map (see ``perf_map``).
- ``always_single``: one device, always.
- ``always_distributed``: the one distributed candidate that is best over the
  whole map (lowest geometric mean of its objective relative to single's).
- ``flop_heuristic``: distributed iff the compute time the FLOPs saved per
  device would take outweighs the time to send that device's bytes at the
  observed bandwidth (rule in ``FlopHeuristicPolicy``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from numbers import Integral
from pathlib import Path
from typing import ClassVar, Literal, Protocol, Self, get_args

from edgetwin.policies.perf_map import Estimate, PerformanceMap
from edgetwin.policies.perf_map_candidates import Deployment
from edgetwin.policies.perf_map_io import read_map

ObjectiveKind = Literal["latency", "energy", "weighted", "ttft", "tpot"]
OBJECTIVES: tuple[ObjectiveKind, ...] = get_args(ObjectiveKind)
DECODER_OBJECTIVES: tuple[ObjectiveKind, ...] = ("ttft", "tpot")  # a decoder's map only
WEIGHTED: ObjectiveKind = "weighted"  # the one objective that reads a weight


@dataclass(frozen=True)
class Objective:
    """What to minimise. ``latency``: ms per batch (a decoder's: the whole generation);
    ``energy``: J per batch over every device (for a decoder the ranking and the regret
    are those of energy per token: the same B x output tokens divide every candidate's);
    ``ttft``, ``tpot``: a decoder's time to first token, mean time per later token;
    ``weighted``: weight x latency + (1 - weight) x energy, each relative to single's at
    the same condition (weight 1 is latency, 0 is energy)."""

    kind: ObjectiveKind = "latency"
    weight: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:  # cost() would take it as weighted
            raise ValueError(f"unknown objective {self.kind!r}; known: {', '.join(OBJECTIVES)}")
        if not 0 <= self.weight <= 1:
            raise ValueError(f"weight must be in [0, 1], got {self.weight}")

    def cost(self, estimate: Estimate, single: Estimate) -> float:
        """Lower is better; NaN (a failed or missing value, or a weighted ratio to a single
        of 0 ms or 0 J) becomes +inf."""
        if self.kind == "latency":
            value = estimate.latency_ms
        elif self.kind == "energy":
            value = estimate.energy_j
        elif self.kind == "ttft":
            value = estimate.ttft_ms
        elif self.kind == "tpot":
            value = estimate.tpot_ms
        elif single.latency_ms > 0 and single.energy_j > 0:
            value = self.weight * estimate.latency_ms / single.latency_ms + (1 - self.weight) * (
                estimate.energy_j / single.energy_j
            )
        else:  # no ratio to single's 0 (a measured 0 J was a ZeroDivisionError): not known
            value = math.nan
        return math.inf if math.isnan(value) else value


@dataclass(frozen=True)
class Decision:
    """The candidate a policy picked and what the map expects of it."""

    strategy: str
    devices: int
    cr: float | None
    segments: int | None
    expected_latency_ms: float
    expected_energy_j: float
    label: str


class SelectionPolicy(Protocol):
    """Picks a deployment for the observed batch, bandwidth and sequence length (tokens;
    None: the map's only one; a decoder's prompt tokens, and its output tokens); devices:
    how many are up, the pick uses at most that many (None: any)."""

    name: ClassVar[str]  # the key an evaluation spec names it by
    label: ClassVar[str]  # its name in a figure

    def choose(
        self,
        batch: float,
        bandwidth_mbps: float,
        devices: int | None = None,
        tokens: float | None = None,
        output_tokens: float | None = None,
    ) -> Decision: ...


@dataclass(frozen=True)
class Condition:
    """An observed condition, its sequence length resolved against the map."""

    batch: float
    bandwidth_mbps: float
    devices_up: int | None
    tokens: float
    output_tokens: float | None = None  # a decoder's


def _check_observed(**observed: float | None) -> None:
    """A ValueError unless each observed value given (not None) is a positive finite number
    (a batch of 0 was a 'math domain error' from the map's log2; a negative bandwidth was
    clamped to the map's lowest and decided on; tokens of 0 or below were extrapolated;
    True was read as 1)."""
    for name, value in observed.items():
        if value is None:
            continue
        if isinstance(value, bool) or not (math.isfinite(value) and value > 0):
            raise ValueError(f"the observed {name} must be a positive number, got {value}")


class _MapPolicy:
    """Shared by the policies: the map, the objective, candidates and decisions; each
    policy implements ``pick``."""

    name: ClassVar[str]

    def __init__(self, perf_map: PerformanceMap, objective: Objective = Objective()) -> None:
        if objective.kind in DECODER_OBJECTIVES and not perf_map.decoder:
            raise ValueError(f"objective {objective.kind} needs a decoder's map")
        self.map = perf_map
        self.objective = objective

    @classmethod
    def from_map(cls, path: str | Path, objective: Objective = Objective()) -> Self:
        """The policy over the map stored at ``path`` (InputError names a bad field)."""
        return cls(read_map(Path(path)), objective)

    def choose(
        self,
        batch: float,
        bandwidth_mbps: float,
        devices: int | None = None,
        tokens: float | None = None,
        output_tokens: float | None = None,
    ) -> Decision:
        """The policy's decision at an observed condition (see ``SelectionPolicy``)."""
        _check_observed(
            batch=batch, bandwidth_mbps=bandwidth_mbps, tokens=tokens, output_tokens=output_tokens
        )
        at = Condition(
            batch,
            bandwidth_mbps,
            devices,
            self.map.resolve_tokens(tokens),
            self.map.resolve_output_tokens(output_tokens),
        )
        return self.pick(at)

    def pick(self, at: Condition) -> Decision:
        raise NotImplementedError

    def candidates(self, devices_up: int | None) -> list[Deployment]:
        """The candidates on at most ``devices_up`` devices, single included (None: all)."""
        if devices_up is not None and (
            isinstance(devices_up, bool) or not isinstance(devices_up, Integral) or devices_up < 1
        ):  # 2.5 up was taken as "at most 2.5", True as 1
            raise ValueError(f"devices up must be a whole number, at least 1, got {devices_up}")
        return [c for c in self.map.candidates if devices_up is None or c.devices <= devices_up]

    def estimate(self, candidate: Deployment, at: Condition) -> Estimate:
        """What the map predicts for ``candidate`` at ``at``."""
        return self.map.estimate(
            candidate, at.batch, at.bandwidth_mbps, at.tokens, at.output_tokens
        )

    def costs(self, at: Condition) -> list[float]:
        """The objective of each of ``candidates(at.devices_up)`` as the map predicts it."""
        single = self.estimate(self.map.single, at)
        candidates = self.candidates(at.devices_up)
        return [self.objective.cost(self.estimate(c, at), single) for c in candidates]

    def decide(self, candidate: Deployment, at: Condition) -> Decision:
        estimate = self.estimate(candidate, at)
        return Decision(
            strategy=candidate.strategy,
            devices=candidate.devices,
            cr=candidate.cr,
            segments=candidate.segments(at.tokens),
            expected_latency_ms=estimate.latency_ms,
            expected_energy_j=estimate.energy_j,
            label=candidate.label,
        )


class AdaptivePolicy(_MapPolicy):
    """The candidate with the lowest interpolated objective (ties: the first in the map)."""

    name: ClassVar[str] = "adaptive"
    label: ClassVar[str] = "adaptive"

    def pick(self, at: Condition) -> Decision:
        candidates = self.candidates(at.devices_up)
        costs = self.costs(at)
        best = min(range(len(candidates)), key=costs.__getitem__)
        return self.decide(candidates[best], at)


class AlwaysSinglePolicy(_MapPolicy):
    """One device, whatever the condition."""

    name: ClassVar[str] = "always_single"
    label: ClassVar[str] = "always single"

    def pick(self, at: Condition) -> Decision:
        return self.decide(self.map.single, at)


class AlwaysDistributedPolicy(_MapPolicy):
    """The distributed candidate with the lowest geometric mean, over the map's grid points
    where single runs, of its objective relative to single's (a point where it does not
    run counts as infinitely worse), among those that fit on the devices up; single when
    none does."""

    name: ClassVar[str] = "always_distributed"
    label: ClassVar[str] = "always distributed"

    def pick(self, at: Condition) -> Decision:
        if all(c.one_device for c in self.map.candidates):
            raise ValueError("the map has no distributed candidate")
        distributed = [c for c in self.candidates(at.devices_up) if not c.one_device]
        best = min(distributed, key=self._log_ratios.__getitem__, default=self.map.single)
        return self.decide(best, at)

    @cached_property
    def _log_ratios(self) -> dict[Deployment, float]:
        """Each distributed candidate's overall log ratio, computed once: it does not
        depend on the condition."""
        ratios: dict[Deployment, float] = {}
        for candidate in self.map.candidates:
            if not candidate.one_device:
                ratios[candidate] = self._overall_log_ratio(candidate)
        return ratios

    def _overall_log_ratio(self, candidate: Deployment) -> float:
        total = 0.0
        for tokens, output, batch, bw in self.map.grid_points():
            single = self.map.estimate(self.map.single, batch, bw, tokens, output)
            mine = self.map.estimate(candidate, batch, bw, tokens, output)
            baseline = self.objective.cost(single, single)
            # no ratio to single where it runs out of memory, or where its objective is 0
            if not math.isinf(baseline) and baseline > 0:
                ratio = self.objective.cost(mine, single) / baseline
                total += math.log(ratio) if ratio > 0 else -math.inf  # 0: infinitely better
        return total


class FlopHeuristicPolicy(_MapPolicy):
    """Distributed iff saved compute time beats transfer time, ignoring staging, overheads
    and a ring's forwarding (the map's ``bytes_sent`` counts each piece once).

    For each distributed candidate c at batch B and bandwidth W (Mbit/s):
    saved_s = (G_single - G_c) x B / R, with G the GFLOPs per device per sample and
    R = G_single x B / latency_single the GFLOP/s one device achieves at this batch (from the
    map); transfer_s = bytes_c / devices_c x 8 / (W x 1e6). The candidate with the largest
    saved_s - transfer_s is chosen if that margin is positive, else single. The objective
    is not used: this is the textbook latency rule the adaptive policy is compared against.
    """

    name: ClassVar[str] = "flop_heuristic"
    label: ClassVar[str] = "FLOP heuristic"

    def pick(self, at: Condition) -> Decision:
        single = self.map.single
        single_s = self.estimate(single, at).latency_ms / 1000
        g_single = single.gflops_per_device
        best: tuple[float, Deployment] = (0.0, single)
        if not single_s > 0:  # no rate for one device to weigh the FLOPs saved against
            return self.decide(single, at)
        for c in self.candidates(at.devices_up):
            if c.one_device or g_single is None or c.gflops_per_device is None:
                continue
            rate_gflops = g_single * at.batch / single_s
            saved_s = (g_single - c.gflops_per_device) * at.batch / rate_gflops
            sent = self.map.bytes_sent(c, at.batch, at.tokens, at.output_tokens)
            transfer_s = sent / c.devices * 8 / (at.bandwidth_mbps * 1e6)
            if saved_s - transfer_s > best[0]:
                best = (saved_s - transfer_s, c)
        return self.decide(best[1], at)


_CLASSES = (AdaptivePolicy, AlwaysSinglePolicy, AlwaysDistributedPolicy, FlopHeuristicPolicy)
POLICIES: dict[str, Callable[[PerformanceMap, Objective], SelectionPolicy]] = {
    cls.name: cls for cls in _CLASSES
}
POLICY_LABELS: dict[str, str] = {cls.name: cls.label for cls in _CLASSES}


def make_policy(
    name: str, perf_map: PerformanceMap, objective: Objective = Objective()
) -> SelectionPolicy:
    """A selection policy by its registered name (KeyError names the known ones)."""
    if name not in POLICIES:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}")
    return POLICIES[name](perf_map, objective)

"""Whether a scenario's strategies can split its model over the devices its sweeps ask
for: why not, naming the strategy, or nothing."""

from __future__ import annotations

from collections.abc import Sequence

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderWorkload
from edgetwin.number_text import counted
from edgetwin.strategy_spec import StrategySpec
from edgetwin.sweep_spec import SweepSpec


def positions_split_problem(
    strategies: Sequence[StrategySpec], sweeps: Sequence[SweepSpec], tokens: int
) -> tuple[int, str] | None:
    """The first sweep (its index) in which a position-wise strategy cannot give every
    device one of ``tokens`` tokens, and why (``STRATEGY: PROBLEM``); None if none."""
    for strategy in strategies:
        definition = registry.strategy(strategy.name)
        if definition.layout is None or definition.one_device:
            continue
        for j, sweep in enumerate(sweeps):
            if max(sweep.devices) > tokens:
                held = counted(tokens, "token")
                problem = f"{held} cannot be split over {max(sweep.devices)} devices"
                return j, f"{strategy.name}: {problem}"
    return None


def encoder_plan_problem(
    strategies: Sequence[StrategySpec], sweeps: Sequence[SweepSpec], model: ModelSpec
) -> tuple[int, str] | None:
    """The first sweep (its index) in which a split that is not by position cannot split
    ``model`` over its devices, as its cost plan says (tensor parallel: a head for each
    device), and why (``STRATEGY: PROBLEM``); None if none."""
    for strategy in strategies:
        definition = registry.strategy(strategy.name)
        by_position = definition.layout is not None or definition.params
        if by_position or definition.one_device or definition.cost_plan is None:
            continue
        for j, sweep in enumerate(sweeps):
            try:
                registry.cost_plan(model, strategy.name, max(sweep.devices))
            except ValueError as exc:
                return j, f"{strategy.name}: {exc}"
    return None


def check_one_split(strategies: Sequence[StrategySpec]) -> None:
    """A strategy listed twice gives the same ``layers`` both times: the split is not part
    of a configuration (its key), which runs once, so a second split would not run."""
    first: dict[str, int] = {}
    for i, strategy in enumerate(strategies):
        j = first.setdefault(strategy.name, i)
        if strategy.layers != strategies[j].layers:
            problem = f"{strategy.name} is listed as strategies.{j} with other layers"
            why = "a configuration runs one split"
            raise ValueError(f"strategies.{i}.layers: {problem} ({why})")


def split_problem(strategy: StrategySpec, model: DecoderSpec, devices: int, prompt: int) -> str:
    """Why ``strategy``'s plan cannot split ``model`` over ``devices`` ('' when it can):
    the plan itself says (heads not divisible, more ranks than positions or layers)."""
    segments = 1 if registry.strategy(strategy.name).params else None
    layers = strategy.layers or None
    workload = DecoderWorkload(model, devices, 1, prompt, segments, layers)
    try:
        registry.decoder_plan(strategy.name, workload)
    except ValueError as exc:
        return str(exc)
    return ""

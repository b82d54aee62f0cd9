"""Question files: a base scenario, overrides, the sweep axes and what to answer.

A question file is validated like a scenario: every error names the file and
the field and exits with status 2 (``InputError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from edgetwin.errors import InputError
from edgetwin.scenario import Scenario, StrategySpec
from edgetwin.schema import (
    PositiveFloat,
    PositiveInt,
    Strict,
    apply_override,
    load_yaml_model,
    read_yaml_mapping,
    validation_error,
)

DISTRIBUTED = ("voltage", "prism", "tensor_parallel")


class Axes(Strict):
    """The sweep: a cartesian product of batch x bandwidth x devices (distributed only)."""

    batch: tuple[PositiveInt, ...] = Field(min_length=1)
    bandwidth_mbps: tuple[PositiveFloat, ...] = Field(min_length=1)
    devices: tuple[Annotated[int, Field(ge=2)], ...] = Field((2,), min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _listify(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: [v] if isinstance(v, int | float) else v for k, v in data.items()}
        return data


def _distributed(strategy: StrategySpec) -> StrategySpec:
    if strategy.name not in DISTRIBUTED:
        raise ValueError(f"strategy must be distributed: one of {DISTRIBUTED}")
    return strategy


class SmallestFleet(Strict):
    """Smallest fleet / bandwidth whose p95 latency over repetitions meets a target."""

    kind: Literal["smallest_fleet"]
    target_p95_ms: PositiveFloat
    strategy: StrategySpec

    @field_validator("strategy")
    @classmethod
    def _check(cls, strategy: StrategySpec) -> StrategySpec:
        if len(strategy.cr) + len(strategy.segments) > 1:
            raise ValueError("smallest_fleet takes one 'cr' or 'segments' value")
        return _distributed(strategy)


class Crossover(Strict):
    """The bandwidth from which a distributed strategy beats one device (per batch, fleet)."""

    kind: Literal["crossover"]
    strategy: StrategySpec

    @field_validator("strategy")
    @classmethod
    def _check(cls, strategy: StrategySpec) -> StrategySpec:
        return _distributed(strategy)


class BestMode(Strict):
    """The fastest candidate over batch x bandwidth, and the latency-energy Pareto front."""

    kind: Literal["best_mode"]


QuestionKind = Annotated[SmallestFleet | Crossover | BestMode, Field(discriminator="kind")]


class PlanQuestion(Strict):
    """A whole question file."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    scenario: str = Field(min_length=1)  # relative to the question file
    set: tuple[str, ...] = ()  # --set overrides of the scenario, applied in order
    axes: Axes
    question: QuestionKind


@dataclass(frozen=True)
class LoadedQuestion:
    """A question file resolved: the question and the scenario it sweeps."""

    path: Path
    question: PlanQuestion
    scenario: Scenario
    scenario_path: Path


def load_question(path: Path, overrides: tuple[str, ...] = ()) -> LoadedQuestion:
    """Read and validate a question file and build the scenario it sweeps."""
    question = load_yaml_model(path, PlanQuestion, overrides)
    scenario_path = path.resolve().parent / question.scenario
    if not scenario_path.is_file():
        raise InputError(path, "scenario", f"file not found: {scenario_path}")
    scenario_raw = read_yaml_mapping(scenario_path)
    for item in question.set:
        apply_override(scenario_raw, item, path)
    scenario_raw["sweeps"] = [question.axes.model_dump(mode="json")]
    strategies = _strategies(question.question)
    if strategies is not None:
        scenario_raw["strategies"] = strategies
    try:
        scenario = Scenario.model_validate(scenario_raw)
    except ValidationError as exc:
        raise _as_swept(validation_error(exc, path), question.scenario) from None
    if scenario.crowd is not None:
        raise InputError(path, "scenario", "plan sweeps device fleets, not crowd scenarios")
    return LoadedQuestion(path, question, scenario, scenario_path)


def _as_swept(error: InputError, scenario: str) -> InputError:
    """A scenario error after overrides: sweep fields are the question's axes."""
    field, problem = error.field, error.problem
    if field is None and problem.startswith("sweeps.0."):
        field, _, problem = problem.partition(" ")
    if field is not None and field.startswith("sweeps.0."):
        return InputError(error.path, "axes." + field.removeprefix("sweeps.0."), problem)
    return InputError(error.path, field, f"{problem} (scenario {scenario} with 'set' applied)")


def _strategies(kind: SmallestFleet | Crossover | BestMode) -> list[dict[str, Any]] | None:
    """The strategies the sweep runs; None keeps the scenario's own."""
    if isinstance(kind, SmallestFleet):
        return [kind.strategy.model_dump(mode="json", exclude_defaults=True)]
    if isinstance(kind, Crossover):
        return [{"name": "single"}, kind.strategy.model_dump(mode="json", exclude_defaults=True)]
    return None

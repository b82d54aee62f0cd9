"""An evaluation file of the adaptive-deployment policies, read and checked: its scenario,
the map's sequence lengths or table, and its ground truth (held-out twin conditions or a
table of measured runs); ``evaluate.adaptive`` scores the policies on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from edgetwin.comparison import check_reference
from edgetwin.decoder_spec import DecoderSpec, positions_problem
from edgetwin.errors import InputError
from edgetwin.evaluate.measured import (
    SCORED_COLUMNS,
    median_per_configuration,
    read_measured,
)
from edgetwin.file_kinds import check_kind, check_named_scenario
from edgetwin.policies.adaptive import (
    DECODER_OBJECTIVES,
    POLICIES,
    Objective,
    ObjectiveKind,
)
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.schema import (
    Strict,
    Tokens,
    check_known_once,
    load_yaml_model,
    optional_values,
    read_yaml_mapping,
    referenced_file,
)
from edgetwin.sim.fleet import build_fleet
from edgetwin.split_problems import positions_split_problem
from edgetwin.sweep_spec import SweepSpec, longest_generation

TokenCounts = tuple[Tokens, ...]  # sequence lengths; left out: the scenario model's own


class HeldOutSpec(SweepSpec):
    """Held-out conditions: batch x bandwidth x devices up x sequence length (tokens; a
    decoder's: prompt tokens x output tokens)."""

    tokens: TokenCounts = optional_values()

    def sweep(self) -> SweepSpec:
        """The twin sweep of one sequence length: every device count from 2 to the most
        devices up (with N up, the oracle may deploy on any count <= N)."""
        runnable = tuple(range(2, max(self.devices) + 1))
        return SweepSpec.model_validate(self.model_dump(exclude={"tokens"}) | {"devices": runnable})


class EvalSettings(Strict):
    """An evaluation file: the scenario profiled for the map, and the held-out conditions."""

    scenario: str = Field(min_length=1)  # relative to the evaluation file
    map_tokens: TokenCounts = optional_values()  # sequence lengths the map is profiled at
    held_out: HeldOutSpec | None = None  # the twin is the ground truth at these
    truth_table: str | None = None  # or measured runs are (relative to the file)
    objective: ObjectiveKind = "latency"
    weight: Annotated[float, Field(ge=0, le=1)] = 0.5
    policies: tuple[str, ...] = tuple(POLICIES)
    map_table: str | None = None  # results table to build the map from instead of the twin

    @field_validator("policies")
    @classmethod
    def _known(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        check_known_once(names, POLICIES, "policy")
        if "adaptive" not in names:
            raise ValueError("policies must include 'adaptive'")
        return names

    @property
    def objective_spec(self) -> Objective:
        return Objective(self.objective, self.weight)


@dataclass(frozen=True)
class EvalInputs:
    """An evaluation file resolved: its scenario, settings, map table and measured truth."""

    scenario: Scenario
    scenario_path: Path
    settings: EvalSettings
    map_table: Path | None
    truth_rows: tuple[ResultRow, ...] | None = None
    truth_table: Path | None = None


def load_eval_inputs(path: Path, overrides: tuple[str, ...] = ()) -> EvalInputs:
    """Read an evaluation file (``--set key=value`` overrides); paths are relative to it."""
    check_kind(path, "evaluation")
    settings = load_yaml_model(path, EvalSettings, overrides)
    _check_one_truth(settings, path)
    base = path.resolve().parent
    scenario_path = referenced_file(settings.scenario, base, path, "scenario")
    table = None
    if settings.map_table is not None:
        table = referenced_file(settings.map_table, base, path, "map_table")
        check_reference(table, path, "map_table", SCORED_COLUMNS)
    check_named_scenario(read_yaml_mapping(scenario_path), scenario_path, path, "scenario")
    scenario = load_scenario(scenario_path)
    if scenario.crowd is not None:  # its strategies have no cost plan for the map to sample
        problem = (
            f"{scenario_path.name} is a crowd scenario: evaluate scores the choice among a "
            "model's split strategies; a crowd's schedulers are scored by evaluate-affinity"
        )
        raise InputError(path, "scenario", problem)
    _check_model_kind(settings, scenario, scenario_path, path)
    _check_sequence_lengths(settings, scenario, path)
    build_fleet(scenario, scenario_path)  # its device profiles
    fleet = sum(d.count for d in scenario.devices)
    held_out = settings.held_out
    if held_out is not None and max(held_out.devices) > fleet:
        up = max(held_out.devices)
        raise InputError(
            path, "held_out.devices", f"{up} devices up, but {scenario_path.name} has {fleet}"
        )
    if settings.truth_table is None:
        return EvalInputs(scenario, scenario_path, settings, table)
    truth = referenced_file(settings.truth_table, base, path, "truth_table")
    tokens = scenario.model.tokens if not isinstance(scenario.model, DecoderSpec) else 0
    rows = median_per_configuration(read_measured(truth, path, tokens))
    return EvalInputs(scenario, scenario_path, settings, table, tuple(rows), truth)


def _check_one_truth(settings: EvalSettings, path: Path) -> None:
    """One ground truth, named: ``held_out`` (the twin) or ``truth_table`` (measured)."""
    if settings.held_out is not None and settings.truth_table is not None:
        problem = "a second ground truth beside held_out: give held_out or truth_table"
        raise InputError(path, "truth_table", problem)
    if settings.held_out is None and settings.truth_table is None:
        problem = "no ground truth: give held_out (the twin's runs) or truth_table (measured)"
        raise InputError(path, "held_out", problem)


def _check_model_kind(
    settings: EvalSettings, scenario: Scenario, scenario_path: Path, path: Path
) -> None:
    """The fields that are for a decoder only, or for an encoder only; a decoder's held-out
    prompts and outputs fit its positions."""
    held_out, name = settings.held_out, scenario_path.name
    if isinstance(scenario.model, DecoderSpec):
        if settings.map_tokens:
            problem = f"{name} runs a decoder: its sweeps' prompt_tokens are the map's"
            raise InputError(path, "map_tokens", problem)
        if held_out is not None and held_out.tokens:
            problem = f"{name} runs a decoder: give held_out.prompt_tokens"
            raise InputError(path, "held_out.tokens", problem)
        workload = scenario.decoder_workload
        too_long = held_out and positions_problem(
            scenario.model, *longest_generation(held_out, workload)
        )
        if too_long:  # the scenario checks its own sweeps (10^15 output tokens ran until killed)
            raise InputError(path, "held_out", too_long)
        return
    if settings.objective in DECODER_OBJECTIVES:
        problem = f"{settings.objective} is a decoder's objective; {name} runs an encoder"
        raise InputError(path, "objective", problem)
    for key in ("prompt_tokens", "output_tokens"):
        if held_out is not None and getattr(held_out, key):
            problem = f"{name} runs an encoder: give held_out.tokens"
            raise InputError(path, f"held_out.{key}", problem)


def _check_sequence_lengths(settings: EvalSettings, scenario: Scenario, path: Path) -> None:
    """Every split of the map's sweeps (and of the held-out one) gives each device a token
    at each sequence length the evaluation runs; the scenario checked its model's only (1
    token over 2 devices was a ValueError traceback from the twin's layout)."""
    if isinstance(scenario.model, DecoderSpec):
        return  # its lengths are its sweeps' prompts, which the scenario checked
    held_out = settings.held_out
    runs = [("map_tokens", settings.map_tokens, scenario.sweeps)]
    if held_out is not None:
        runs.append(("held_out.tokens", held_out.tokens, (held_out.sweep(),)))
    for field, lengths, sweeps in runs:
        for i, tokens in enumerate(lengths):
            split = positions_split_problem(scenario.strategies, sweeps, tokens)
            if split is not None:  # the scenario names the sweep; here, the length
                raise InputError(path, f"{field}.{i}", split[1])

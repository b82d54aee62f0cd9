"""What an adaptive evaluation checks before it scores: each column the objective ranks
by has a value above 0 on both sides (map and truth), single runs wherever another
candidate does (weighted), the conditions where no candidate runs; and the warnings on
what the map lacks for a policy. Errors name the file and the field."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive_inputs import EvalSettings
from edgetwin.evaluate.adaptive_scores import ConditionKey, baseline_label, condition_text
from edgetwin.number_text import exact_text
from edgetwin.policies.adaptive import WEIGHTED, Objective, ObjectiveKind
from edgetwin.policies.perf_map import Estimate, PerformanceMap
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario

# the results columns each objective ranks by (weighted divides energy by single's)
RANKED_COLUMNS: dict[ObjectiveKind, tuple[str, ...]] = {
    "latency": ("total_ms",),
    "energy": ("energy_j",),
    WEIGHTED: ("total_ms", "energy_j"),
    "ttft": ("ttft_ms",),
    "tpot": ("tpot_ms",),
}


def settings_error(
    settings_path: Path | None, scenario_path: Path | None, field: str, problem: str
) -> InputError:
    """An error of the evaluation file's ``field``; without the file (an API call with the
    settings alone), of the scenario, which the field's values were run on."""
    if settings_path is not None:
        return InputError(settings_path, field, problem)
    return InputError(scenario_path, None, problem)


def _estimate_field(column: str) -> str:
    """The ``Estimate`` (and map grid) field of a results column."""
    return "latency_ms" if column == "total_ms" else column


def check_ranked_values(
    objective: Objective,
    values: dict[str, list[float | None]],
    source: Path | None,
    scenario_path: Path | None,
    outputs: tuple[Path | None, str | None] = (None, None),
) -> None:
    """An InputError unless ``values`` (per results column the objective ranks by, the
    value of every run of one side that did not fail: the ground truth or the map) hold one
    above 0. ``source``: the table
    they come from, None for the twin (powers of 0: a profile without a power meter). The
    energy objectives on such profiles were a ZeroDivisionError (weighted) or ranked zeros,
    and on a truth table without energy_j said that every candidate fails everywhere.
    ``outputs``: the file and field of the twin side's output tokens, named when no TPOT
    is above 0 (one output token has no later one; it was blamed on a power meter)."""
    for column in RANKED_COLUMNS[objective.kind]:
        ran = values[column]  # none: every run failed (said below: every candidate fails)
        if not ran or any(v is not None and math.isfinite(v) and v > 0 for v in ran):
            continue
        ranks = f"objective {objective.kind} ranks by {column}"
        if source is None and column == "tpot_ms":
            problem = f"{ranks}, and a TPOT needs 2 or more output tokens"
            raise InputError(*outputs, problem)
        if source is None:
            problem = f"{ranks}, and the twin predicts none above 0 (no power meter)"
            raise InputError(scenario_path, "devices", problem)
        raise InputError(source, column, f"{ranks}, and no row has one above 0")


def output_tokens_field(scenario: Scenario) -> str:
    """Where a decoder scenario's map takes its output tokens: the first sweep that lists
    them, else the workload."""
    listed = (i for i, sweep in enumerate(scenario.sweeps) if sweep.output_tokens)
    index = next(listed, None)
    return "workload.output_tokens" if index is None else f"sweeps.{index}.output_tokens"


def row_values(objective: Objective, rows: Sequence[ResultRow]) -> dict[str, list[float | None]]:
    """Each ranked column's values in the results rows that did not fail."""
    ran = [r for r in rows if r.ok]
    return {c: [getattr(r, c) for r in ran] for c in RANKED_COLUMNS[objective.kind]}


def map_values(objective: Objective, perf_map: PerformanceMap) -> dict[str, list[float | None]]:
    """Each ranked column's values in the map's grids."""
    columns = RANKED_COLUMNS[objective.kind]
    return {c: _grid_values(perf_map, _estimate_field(c)) for c in columns}


def _grid_values(perf_map: PerformanceMap, metric: str) -> list[float | None]:
    """Every cell of the map's ``metric`` grids that holds a value."""
    values: list[float | None] = []
    for candidate in perf_map.candidates:
        stack: list[Any] = [getattr(candidate, metric)]
        while stack:
            item = stack.pop()
            if isinstance(item, tuple | list):
                stack.extend(item)
            elif item is not None:
                values.append(float(item))
    return values


def flopless(settings: EvalSettings, perf_map: PerformanceMap) -> list[str]:
    """A warning when flop_heuristic is scored on a map without the FLOPs it weighs (a
    results table without gflops_per_device): it then picks single at every condition."""
    if "flop_heuristic" not in settings.policies:
        return []
    single = perf_map.single.gflops_per_device
    spread = [
        c for c in perf_map.candidates if not c.one_device and c.gflops_per_device is not None
    ]
    if single is not None and spread:
        return []
    return [
        "flop_heuristic weighs each candidate's gflops_per_device, which the map lacks: "
        "it picks single at every condition"
    ]


def unread_weight(settings: EvalSettings, path: Path | None) -> list[str]:
    """A warning naming ``path`` and the field when the evaluation file gives ``weight`` but
    an objective other than weighted, the only one that reads it (it went unsaid)."""
    if "weight" not in settings.model_fields_set or settings.objective == WEIGHTED:
        return []
    problem = (
        f"{exact_text(settings.weight)} is read by objective weighted only: "
        f"{settings.objective} ignores it"
    )
    return [InputError(path, "weight", problem).message]


def single_fails_where_others_run(truth: dict[ConditionKey, dict[str, Estimate]]) -> str | None:
    """The first condition where single failed and another candidate ran (there the
    weighted objective, a ratio to single's, ranks nothing: every cost was inf, and the
    condition was dropped as one where every candidate fails), as text; None if none."""
    for key, here in truth.items():
        ran = [label for label, value in here.items() if not math.isnan(value.latency_ms)]
        if ran and baseline_label() not in ran:
            return condition_text(key)
    return None


def every_candidate_fails(truth: dict[str, Estimate], objective: Objective) -> bool:
    """Every candidate failed (ran out of memory): no pick is better, none is scored."""
    baseline = truth[baseline_label()]
    return all(math.isinf(objective.cost(value, baseline)) for value in truth.values())

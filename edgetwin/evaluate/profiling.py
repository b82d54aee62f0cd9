"""The twin profiles a scenario into a performance map: its sweeps at each sequence length."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from edgetwin.policies.perf_map import PerformanceMap, map_from_rows
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario, SweepSpec
from edgetwin.sim.runner import RunOutcome, build_fleet, run_scenario


def rows_at_tokens(
    scenario: Scenario,
    scenario_path: Path | None,
    sweep: SweepSpec,
    tokens: Sequence[int],
    on_step: Callable[[], None] = lambda: None,
) -> list[ResultRow]:
    """Run ``sweep`` in the twin once per sequence length (the scenario's model with that
    many tokens); every row carries its ``tokens`` and the CR requested (not the one its
    segments give at that length). Empty ``tokens``: the model's own. ``on_step`` is called
    after each sequence length."""
    fleet = build_fleet(scenario, scenario_path)
    rows = []
    for count in tokens or (scenario.encoder.tokens,):
        model = scenario.encoder.model_copy(update={"tokens": count})
        at = scenario.model_copy(update={"model": model, "sweeps": (sweep,)})
        rows += [replace(o.row, tokens=count, cr=_named_cr(o)) for o in run_scenario(at, fleet)]
        on_step()
    return rows


def sweep_steps(sweeps: int, tokens: Sequence[int]) -> int:
    """How many ``on_step`` calls ``sweeps`` sweeps at ``tokens`` make (one per length)."""
    return sweeps * max(1, len(tokens))


def _named_cr(outcome: RunOutcome) -> float | None:
    """The CR a candidate is named by: the one requested (the same at every sequence
    length), else the one its segments give."""
    return outcome.row.cr if outcome.config.cr is None else outcome.config.cr


def profile_twin(
    scenario: Scenario,
    scenario_path: Path | None,
    tokens: Sequence[int] = (),
    on_step: Callable[[], None] = lambda: None,
) -> PerformanceMap:
    """Run the scenario's sweeps in the twin at each sequence length; they become the map."""
    rows = [
        r
        for sweep in scenario.sweeps
        for r in rows_at_tokens(scenario, scenario_path, sweep, tokens, on_step)
    ]
    return map_from_rows(rows, scenario.name, "twin", scenario_path, scenario.encoder.tokens)

"""The unit of work of a sweep: a chunk of configurations, run in any process.

A configuration runs all its repetitions with the seeds ``run_scenario`` uses
(scenario seed, configuration index, rep), so where a chunk runs does not
change its rows.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgetwin.results import ResultRow
from edgetwin.scenario import Configuration, Scenario, configurations
from edgetwin.sim.runner import FleetMember, build_fleet, simulate


@dataclass(frozen=True)
class SweepPayload:
    """What a worker needs to run any configuration: the scenario as JSON and its path."""

    scenario_json: str
    scenario_path: str


@dataclass(frozen=True)
class ConfigResult:
    """Every repetition of one configuration, by its index in ``configurations``."""

    index: int
    rows: tuple[ResultRow, ...]


def payload_for(scenario: Scenario, scenario_path: Path) -> SweepPayload:
    """The payload of a scenario (profile paths resolve relative to ``scenario_path``)."""
    return SweepPayload(scenario.model_dump_json(), str(scenario_path))


@functools.lru_cache(maxsize=4)
def _prepared(payload: SweepPayload) -> tuple[Scenario, list[FleetMember], list[Configuration]]:
    """Scenario, fleet and configurations, parsed once per process."""
    scenario = Scenario.model_validate_json(payload.scenario_json)
    fleet = build_fleet(scenario, Path(payload.scenario_path))
    return scenario, fleet, configurations(scenario)


def run_chunk(payload: SweepPayload, indexes: Sequence[int]) -> list[ConfigResult]:
    """Run the configurations at ``indexes``, every repetition of each."""
    scenario, fleet, configs = _prepared(payload)
    return [
        ConfigResult(
            index,
            tuple(
                simulate(scenario, fleet, configs[index], index, rep).row
                for rep in range(scenario.repetitions)
            ),
        )
        for index in indexes
    ]


def chunks(indexes: Sequence[int], size: int) -> list[list[int]]:
    """``indexes`` cut into consecutive lists of at most ``size``."""
    return [list(indexes[i : i + size]) for i in range(0, len(indexes), size)]

"""The unit of work of a sweep: a chunk of configurations, run in any process.

Two kinds of sweep: device fleets in the twin (a unit is one configuration
of ``configurations``, all its repetitions, with the seeds ``run_scenario``
uses: scenario seed, configuration index, rep) and crowd fleets (a unit is
one fleet size and repetition, run by the crowd twin with its own seeds).
Where a chunk runs does not change its rows.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from edgetwin.configuration import crowd_runs
from edgetwin.plan.questions import CrowdAxes, LoadedQuestion
from edgetwin.results import ResultRow
from edgetwin.scenario import Configuration, Scenario, configurations
from edgetwin.sim.crowd.runner import prepare_crowd, simulate_crowd
from edgetwin.sim.runner import FleetMember, build_fleet, simulate


@dataclass(frozen=True)
class ConfigResult:
    """Every row of one unit of the sweep, by its index."""

    index: int
    rows: tuple[ResultRow, ...]


class Payload(Protocol):
    """What a worker needs to run any unit of a sweep (picklable, hashable)."""

    @property
    def identity(self) -> str:
        """Text that changes whenever the rows of the sweep could (for the journal)."""
        ...

    def units(self) -> int:
        """How many units the sweep has."""
        ...

    def run(self, indexes: Sequence[int]) -> list[ConfigResult]:
        """Run the units at ``indexes``."""
        ...


@dataclass(frozen=True)
class SweepPayload:
    """A device-fleet sweep: the scenario as JSON and its path."""

    scenario_json: str
    scenario_path: str

    @property
    def identity(self) -> str:
        return self.scenario_json

    def units(self) -> int:
        return len(_prepared(self)[2])

    def run(self, indexes: Sequence[int]) -> list[ConfigResult]:
        scenario, fleet, configs = _prepared(self)
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


@functools.lru_cache(maxsize=4)
def _prepared(payload: SweepPayload) -> tuple[Scenario, list[FleetMember], list[Configuration]]:
    """Scenario, fleet and configurations, parsed once per process."""
    scenario = Scenario.model_validate_json(payload.scenario_json)
    fleet = build_fleet(scenario, Path(payload.scenario_path))
    return scenario, fleet, configurations(scenario)


@dataclass(frozen=True)
class CrowdPayload:
    """A crowd sweep: unit i is fleet size ``fleet_sizes[i // reps]``, repetition ``i % reps``."""

    scenario_json: str
    scenario_path: str
    fleet_sizes: tuple[int, ...]

    @property
    def identity(self) -> str:
        return f"{self.scenario_json} fleet sizes {list(self.fleet_sizes)}"

    def units(self) -> int:
        return len(self.fleet_sizes) * _crowd_scenario(self.scenario_json).repetitions

    def run(self, indexes: Sequence[int]) -> list[ConfigResult]:
        base = _crowd_scenario(self.scenario_json)
        path = Path(self.scenario_path)
        results = []
        for index in indexes:
            size, rep = divmod(index, base.repetitions)
            scenario = crowd_of_size(base, self.fleet_sizes[size])
            run = crowd_runs(scenario)[rep]
            rows = simulate_crowd(scenario, prepare_crowd(scenario, path), run).rows
            results.append(ConfigResult(index, tuple(rows)))
        return results


@functools.lru_cache(maxsize=4)
def _crowd_scenario(scenario_json: str) -> Scenario:
    return Scenario.model_validate_json(scenario_json)


def crowd_of_size(scenario: Scenario, fleet_size: int) -> Scenario:
    """The crowd scenario with ``fleet_size`` phones (classes keep their shares)."""
    assert scenario.crowd is not None
    crowd = scenario.crowd.model_copy(update={"fleet_size": fleet_size})
    return scenario.model_copy(update={"crowd": crowd})


def payload_for(loaded: LoadedQuestion) -> SweepPayload | CrowdPayload:
    """The payload of a question's sweep (profile paths resolve relative to the scenario)."""
    scenario_json = loaded.scenario.model_dump_json()
    path = str(loaded.scenario_path)
    axes = loaded.question.axes
    if isinstance(axes, CrowdAxes):
        return CrowdPayload(scenario_json, path, axes.fleet_size)
    return SweepPayload(scenario_json, path)


def run_chunk(payload: Payload, indexes: Sequence[int]) -> list[ConfigResult]:
    """Run the units at ``indexes`` (module-level, so that it pickles to any worker)."""
    return payload.run(indexes)


def chunks(indexes: Sequence[int], size: int) -> list[list[int]]:
    """``indexes`` cut into consecutive lists of at most ``size``."""
    return [list(indexes[i : i + size]) for i in range(0, len(indexes), size)]

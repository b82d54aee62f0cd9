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

from edgetwin.configuration import CrowdRun, configuration_label, crowd_runs, run_label
from edgetwin.decoder_spec import DecoderSpec, longest_prompt_tokens
from edgetwin.device_fleet import FleetMember
from edgetwin.models import registry
from edgetwin.network_spec import BandwidthStep
from edgetwin.plan.question_file import LoadedQuestion
from edgetwin.plan.questions import CrowdAxes
from edgetwin.provenance import sha256_file
from edgetwin.results import STATUS_OK, ResultRow
from edgetwin.scenario import Scenario
from edgetwin.scenario_paths import files_of_runs
from edgetwin.sim.crowd.runner import prepare_crowd, simulate_crowd
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import decoder_memory_status, simulate, unplayed_of_ran
from edgetwin.sweep_points import Configuration, configurations


@dataclass(frozen=True)
class ConfigResult:
    """Every row of one unit of the sweep, by its index; ``unplayed``: each of its runs'
    network.schedule steps it ended before, one per run that ran (``unplayed_of_ran``; the
    journal keeps them beside the rows)."""

    index: int
    rows: tuple[ResultRow, ...]
    unplayed: tuple[tuple[BandwidthStep, ...], ...] = ()


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

    def label(self, index: int) -> str:
        """How progress names the unit at ``index``."""
        ...


@dataclass(frozen=True)
class SweepPayload:
    """A device-fleet sweep: the scenario as JSON and its path. Its units are the
    configurations, then (``context_search``) one longest-context search per decoder
    candidate, batch and output length (``context_searches``). ``files``
    (``files_digest``) makes a profile edited since another payload (the same path, other
    bytes) another payload: a process keeps its fleet per payload (``_prepared``)."""

    scenario_json: str
    scenario_path: str
    context_search: bool = False
    files: str = ""

    @property
    def identity(self) -> str:
        return self.scenario_json + (" longest context" if self.context_search else "")

    def units(self) -> int:
        _, _, configs, searches = _prepared(self)
        return len(configs) + len(searches)

    def run(self, indexes: Sequence[int]) -> list[ConfigResult]:
        scenario, fleet, configs, searches = _prepared(self)
        results = []
        for index in indexes:
            if index < len(configs):
                outcomes = [
                    simulate(scenario, fleet, configs[index], rep)
                    for rep in range(scenario.repetitions)
                ]
            else:
                search = searches[index - len(configs)]
                outcomes = [
                    simulate(scenario, fleet, config, 0)
                    for config in memory_edge_configs(scenario, fleet, search)
                ]
            rows = tuple(o.row for o in outcomes)
            results.append(ConfigResult(index, rows, tuple(unplayed_of_ran(outcomes))))
        return results

    def label(self, index: int) -> str:
        """A configuration's ``configuration_label`` (every repetition of it), or
        ``longest context from`` the search's first configuration."""
        _, _, configs, searches = _prepared(self)
        if index < len(configs):
            return configuration_label(configs[index])
        return f"longest context from {configuration_label(searches[index - len(configs)])}"


@functools.lru_cache(maxsize=4)
def _prepared(
    payload: SweepPayload,
) -> tuple[Scenario, list[FleetMember], list[Configuration], list[Configuration]]:
    """Scenario, fleet, configurations and context searches, parsed once per process."""
    scenario = Scenario.model_validate_json(payload.scenario_json)
    fleet = build_fleet(scenario, Path(payload.scenario_path))
    configs = configurations(scenario)
    return scenario, fleet, configs, context_searches(configs) if payload.context_search else []


def context_searches(configs: Sequence[Configuration]) -> list[Configuration]:
    """One search per candidate, batch and output length, at the first swept bandwidth
    (memory does not depend on it) and from the shortest swept prompt (one the scenario
    checked its split for)."""
    first: dict[Configuration, Configuration] = {}
    for config in configs:
        key = config.model_copy(update={"prompt_tokens": None, "bandwidth_mbps": 0.0})
        shortest = first.setdefault(key, config)
        if (config.prompt_tokens or 0) < (shortest.prompt_tokens or 0):
            first[key] = shortest.model_copy(update={"prompt_tokens": config.prompt_tokens})
    return list(first.values())


def memory_edge_configs(
    scenario: Scenario, fleet: list[FleetMember], search: Configuration
) -> list[Configuration]:
    """The configurations at the edge of what fits: the longest prompt T that runs without
    running out of memory (bisected on the twin's memory check, which grows with T, from
    the search's own prompt, or below it when even that does not fit) and T + 1, which
    does not; T alone when the model's positions end first; the shortest prompt the
    candidate takes alone when not even it fits."""
    assert isinstance(scenario.model, DecoderSpec)
    assert search.prompt_tokens is not None and search.output_tokens is not None
    at = functools.partial(_with_prompt, search)
    highest = longest_prompt_tokens(scenario.model.max_positions, search.output_tokens)
    if decoder_memory_status(scenario, fleet, at(highest)) == STATUS_OK:
        return [at(highest)]
    fits, fails = search.prompt_tokens, highest  # invariant: fits fits, fails does not
    if decoder_memory_status(scenario, fleet, at(fits)) != STATUS_OK:
        fits, fails = _shortest_prompt_tokens(search), fits
        if decoder_memory_status(scenario, fleet, at(fits)) != STATUS_OK:
            return [at(fits)]
    while fails - fits > 1:
        middle = (fits + fails) // 2
        if decoder_memory_status(scenario, fleet, at(middle)) == STATUS_OK:
            fits = middle
        else:
            fails = middle
    return [at(fits), at(fails)]


def _shortest_prompt_tokens(config: Configuration) -> int:
    """The shortest prompt a candidate runs: a position-wise split gives each device one."""
    definition = registry.strategy(config.strategy)
    splits_positions = definition.layout is not None and not definition.one_device
    return config.devices if splits_positions else 1


def _with_prompt(config: Configuration, prompt_tokens: int) -> Configuration:
    return config.model_copy(update={"prompt_tokens": prompt_tokens})


@dataclass(frozen=True)
class CrowdPayload:
    """A crowd sweep: unit i is fleet size ``fleet_sizes[i // R]`` and run ``i % R`` of the
    R that ``crowd_runs`` gives (bandwidth x repetition: one strategy and scheduler)."""

    scenario_json: str
    scenario_path: str
    fleet_sizes: tuple[int, ...]

    @property
    def identity(self) -> str:
        return f"{self.scenario_json} fleet sizes {list(self.fleet_sizes)}"

    def units(self) -> int:
        return len(self.fleet_sizes) * len(crowd_runs(_crowd_scenario(self.scenario_json)))

    def run(self, indexes: Sequence[int]) -> list[ConfigResult]:
        base = _crowd_scenario(self.scenario_json)
        path = Path(self.scenario_path)
        results = []
        for index in indexes:
            fleet_size, run = self._unit(index)
            scenario = crowd_of_size(base, fleet_size)
            outcome = simulate_crowd(scenario, prepare_crowd(scenario, path), run)
            unplayed = (outcome.unplayed_steps,)
            results.append(ConfigResult(index, tuple(outcome.rows), unplayed))
        return results

    def label(self, index: int) -> str:
        """The fleet size, then the run's ``run_label``:
        ``12 phones, crowdio_streaming affinity 10 Mbps rep 0``."""
        fleet_size, run = self._unit(index)
        return f"{fleet_size} phones, {run_label(run)}"

    def _unit(self, index: int) -> tuple[int, CrowdRun]:
        """The fleet size and run of unit ``index``."""
        runs = crowd_runs(_crowd_scenario(self.scenario_json))  # the size changes none
        size, k = divmod(index, len(runs))
        return self.fleet_sizes[size], runs[k]


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
    return SweepPayload(scenario_json, path, loaded.question.searches_context, files_digest(loaded))


def files_digest(loaded: LoadedQuestion) -> str:
    """The path and SHA-256 of each file the sweep's runs read (profiles, a trace)."""
    files = sorted({p.resolve() for p in files_of_runs(loaded.scenario, loaded.scenario_path)})
    return "".join(f"\n{path} {sha256_file(path)}" for path in files)


def run_chunk(payload: Payload, indexes: Sequence[int]) -> list[ConfigResult]:
    """Run the units at ``indexes`` (module-level, so that it pickles to any worker)."""
    return payload.run(indexes)


def chunks(indexes: Sequence[int], size: int) -> list[list[int]]:
    """``indexes`` cut into consecutive lists of at most ``size``."""
    return [list(indexes[i : i + size]) for i in range(0, len(indexes), size)]

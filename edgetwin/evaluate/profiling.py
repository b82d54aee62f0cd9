"""The twin profiles a scenario into a performance map: its sweeps at each sequence length
(a decoder's sweeps list their prompt and output tokens)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.models import registry
from edgetwin.network_spec import BandwidthStep
from edgetwin.policies.perf_map import PerformanceMap
from edgetwin.policies.perf_map_from_rows import map_from_rows
from edgetwin.progress import Advance
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import RunOutcome, run_scenario, unplayed_of_ran
from edgetwin.split_problems import split_problem
from edgetwin.sweep_points import configurations
from edgetwin.sweep_spec import SweepSpec

Unplayed = list[tuple[BandwidthStep, ...]]  # each twin run's unplayed network.schedule steps


def rows_at_tokens(
    scenario: Scenario,
    scenario_path: Path | None,
    sweep: SweepSpec,
    tokens: Sequence[int],
    on_step: Advance | None = None,
    part: str = "map",
    unplayed: Unplayed | None = None,
) -> list[ResultRow]:
    """Run ``sweep`` in the twin once per sequence length (the scenario's model with that
    many tokens); every row carries its ``tokens`` and the CR requested (not the one its
    segments give at that length). Empty ``tokens``: the model's own. ``on_step`` is told
    each sequence length as it ends, within ``part``: ``map, 197 tokens``. ``unplayed``,
    if given, gets each run's ``RunOutcome.unplayed_steps``, one per run that ran."""
    fleet = build_fleet(scenario, scenario_path)
    rows = []
    for count in tokens or (scenario.encoder.tokens,):
        model = scenario.encoder.model_copy(update={"tokens": count})
        at = scenario.model_copy(update={"model": model, "sweeps": (sweep,)})
        outcomes = _noting_unplayed(run_scenario(at, fleet), unplayed)
        rows += [replace(o.row, tokens=count, cr=_named_cr(o)) for o in outcomes]
        if on_step is not None:  # no label to build for nobody
            on_step(f"{part}, {count} tokens")
    return rows


def sweep_steps(sweeps: int, tokens: Sequence[int]) -> int:
    """How many ``on_step`` calls ``sweeps`` sweeps at ``tokens`` make (one per length)."""
    return sweeps * max(1, len(tokens))


def decoder_runs(scenario: Scenario, sweep: SweepSpec) -> list[Scenario]:
    """A decoder ``sweep`` as one scenario per device count, each with the strategies that
    can split the model on that many devices (tensor parallel needs the heads divisible by
    them, a split needs as many prompt positions and layers), one-device ones once."""
    model = scenario.model
    assert isinstance(model, DecoderSpec)
    prompt = min(sweep.prompt_tokens or (scenario.decoder_workload.prompt_tokens,))
    runs = []
    for index, count in enumerate(sweep.devices):
        strategies = tuple(
            s
            for s in scenario.strategies
            if (
                index == 0
                if registry.strategy(s.name).one_device
                else not split_problem(s, model, count, prompt)
            )
        )
        at = sweep.model_copy(update={"devices": (count,)})
        runs.append(scenario.model_copy(update={"strategies": strategies, "sweeps": (at,)}))
    return runs


def decoder_steps(runs: Sequence[Scenario]) -> int:
    """How many ``on_step`` calls ``decoder_rows`` makes over ``runs`` (one per
    configuration and repetition)."""
    return sum(len(configurations(run)) * run.repetitions for run in runs)


def decoder_rows(
    runs: Sequence[Scenario],
    scenario_path: Path | None,
    on_step: Advance | None = None,
    part: str = "map",
    unplayed: Unplayed | None = None,
) -> list[ResultRow]:
    """Run ``decoder_runs`` in the twin; every row carries the CR requested. ``on_step`` is
    told each configuration as it ends, within ``part``: ``map, `` and its ``step_label``.
    ``unplayed``: as ``rows_at_tokens``'."""
    fleet = build_fleet(runs[0], scenario_path)
    within = None if on_step is None else lambda done: on_step(f"{part}, {done}")
    return [
        replace(o.row, cr=_named_cr(o))
        for run in runs
        for o in _noting_unplayed(run_scenario(run, fleet, on_progress=within), unplayed)
    ]


def _noting_unplayed(outcomes: Iterable[RunOutcome], unplayed: Unplayed | None) -> list[RunOutcome]:
    """``outcomes``, each run's unplayed steps appended to ``unplayed`` if given (of the
    runs that ran: ``unplayed_of_ran``)."""
    ran = list(outcomes)
    if unplayed is not None:
        unplayed += unplayed_of_ran(ran)
    return ran


def map_part(sweep: int, sweeps: int) -> str:
    """How a step of the map's ``sweep`` (0-based) of ``sweeps`` is named."""
    return "map" if sweeps == 1 else f"map sweep {sweep + 1} of {sweeps}"


def _named_cr(outcome: RunOutcome) -> float | None:
    """The CR a candidate is named by: the one requested (the same at every sequence
    length), else the one its segments give."""
    return outcome.row.cr if outcome.config.cr is None else outcome.config.cr


def profile_twin(
    scenario: Scenario,
    scenario_path: Path | None,
    tokens: Sequence[int] = (),
    on_step: Advance | None = None,
    unplayed: Unplayed | None = None,
) -> PerformanceMap:
    """Run the scenario's sweeps in the twin at each sequence length (a decoder's: as they
    are); they become the map. ``on_step`` is told each step (``rows_at_tokens``,
    ``decoder_rows``) as ``map``, ``map sweep 2 of 3`` where the scenario has several;
    ``unplayed``: as ``rows_at_tokens``'."""
    if isinstance(scenario.model, DecoderSpec):
        rows = decoder_rows([scenario], scenario_path, on_step, unplayed=unplayed)
        return map_from_rows(rows, scenario.name, "twin", scenario_path, 0)
    count = len(scenario.sweeps)
    rows = [
        r
        for k, sweep in enumerate(scenario.sweeps)
        for r in rows_at_tokens(
            scenario, scenario_path, sweep, tokens, on_step, map_part(k, count), unplayed
        )
    ]
    return map_from_rows(rows, scenario.name, "twin", scenario_path, scenario.encoder.tokens)

"""Evaluate the crowd schedulers against the offline optimum on small instances.

Each instance is the settings' scenario with a few ``--set`` overrides (phones,
inputs, stages, cache). Every scheduler runs it in the crowd twin
(``repetitions`` runs; with ``deterministic`` the load and run-to-run noise
are off, so only ``random`` varies); ``optimum.py`` finds the best assignment of
the same job offline. With ``mode: emu`` the runs are the real foreman's in the
emulator and the optimum's costs are measured in them
(``affinity_emu``). Regret = (mean makespan - optimum) / optimum, in %.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator

from edgetwin.configuration import CrowdRun
from edgetwin.crowd_fleet import PhoneClass
from edgetwin.errors import InputError, warnings_note
from edgetwin.evaluate.affinity_results import (
    AssignmentReplay,
    InstanceResult,
    RunFigures,
    scheduler_result,
)
from edgetwin.evaluate.optimum import Assignment, Optimum, build_instance, optimum
from edgetwin.file_kinds import check_kind, check_named_scenario
from edgetwin.number_text import exact_text, figure_text
from edgetwin.policies.scheduling import SCHEDULERS
from edgetwin.progress import Advance
from edgetwin.results import STATUS_OK, ResultRow
from edgetwin.scenario import Scenario, validate_scenario
from edgetwin.schema import (
    FileName,
    Strict,
    apply_listed_override,
    apply_override,
    as_scenario_problem,
    check_known_once,
    first_repeated,
    read_yaml_mapping,
    referenced_file,
    validation_error,
)
from edgetwin.sim.crowd.foreman import OUT_OF_TIME
from edgetwin.sim.crowd.runner import CrowdSetup, prepare_crowd, simulate_crowd
from edgetwin.sweep_points import swept_bandwidths

MAX_OPTIMUM_TASKS = 200  # inputs x stages of one instance: the search recurses once per task


class InstanceSpec(Strict):
    """One small instance: a name and overrides of the base scenario."""

    name: FileName
    set: tuple[str, ...] = ()


AffinityMode = Literal["twin", "emu"]  # the twin, or the real foreman on Mininet hosts
AFFINITY_MODES: tuple[str, ...] = get_args(AffinityMode)


class AffinitySettings(Strict):
    """An affinity evaluation file."""

    scenario: str = Field(min_length=1)  # relative to the evaluation file
    mode: AffinityMode = "twin"
    schedulers: tuple[str, ...] = Field(tuple(SCHEDULERS), min_length=1)
    repetitions: Annotated[int, Field(ge=1, le=100)] = 5
    deterministic: bool = True
    node_limit: Annotated[int, Field(ge=1)] = 2_000_000
    instances: tuple[InstanceSpec, ...] = Field(min_length=1)

    @field_validator("schedulers")
    @classmethod
    def _known(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        check_known_once(names, SCHEDULERS, "scheduler")
        return names


@dataclass(frozen=True)
class AffinityEvaluation:
    """Everything ``evaluate_affinity`` measured; ``to_json`` is affinity.json."""

    settings: AffinitySettings
    instances: tuple[InstanceResult, ...]
    warnings: tuple[str, ...] = ()  # the emulator's, each naming its instance

    def __repr__(self) -> str:
        """A line a notebook can show (the instances are ``instances``), with how many
        warnings."""
        shown = f"{len(self.instances)} instances, {self.settings.mode}"
        return f"AffinityEvaluation({shown}{warnings_note(self.warnings)})"

    def describe(self) -> list[str]:
        """The lines ``edgetwin evaluate-affinity`` prints after its warnings: per instance
        the optimum's makespan and each scheduler's regret over it."""
        lines = []
        for instance in self.instances:
            optimum_s = instance.optimum.schedule.makespan_ms / 1e3
            proved = "" if instance.optimum.proved else " (not proved within node_limit)"
            regrets = ", ".join(f"{n} {s.regret_pct:.1f} %" for n, s in instance.schedulers.items())
            makespan = f"optimum makespan {figure_text(optimum_s)} s{proved}"
            lines.append(
                f"{instance.name} ({instance.strategy}): {makespan}; regret (makespan over the"
                f" optimum's): {regrets}"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.settings.mode,
            "repetitions": self.settings.repetitions,
            "deterministic": self.settings.deterministic,
            "instances": [_instance_json(r) for r in self.instances],
        }


def load_affinity_settings(
    path: Path,
    mode: AffinityMode | None = None,
    *,
    machine: bool = True,
    overrides: Sequence[str] = (),
) -> tuple[AffinitySettings, list[tuple[Scenario, Path]]]:
    """Read an evaluation file (``--set``-style ``overrides`` on it, then ``mode`` over its
    own) and build each instance's scenario; errors name the field. ``machine`` False
    leaves out what the emulator needs of this machine (root, Mininet, free memory:
    ``--check``)."""
    check_kind(path, "affinity")
    raw = read_yaml_mapping(path)
    for item in overrides:
        apply_override(raw, item, path)
    if mode is not None:
        raw["mode"] = mode
    try:
        settings = AffinitySettings.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, path, AffinitySettings) from None
    _check_instance_names(settings.instances, path)
    scenario_path = referenced_file(settings.scenario, path.resolve().parent, path, "scenario")
    scenario_raw = read_yaml_mapping(scenario_path)
    check_named_scenario(scenario_raw, scenario_path, path, "scenario")
    base = {**scenario_raw, "repetitions": settings.repetitions}
    validate_scenario(_deep_copy(base), scenario_path)  # its own errors name it
    scenarios = []
    for k, instance in enumerate(settings.instances):
        scenario = _instance_scenario(base, instance, scenario_path, (path, f"instances.{k}"))
        crowd = scenario.crowd
        if crowd is None:
            raise InputError(path, f"instances.{k}", "the scenario has no 'crowd' section")
        if crowd.job.interarrival is not None or crowd.availability_trace is not None:
            raise InputError(path, f"instances.{k}", "one job without churn only (no optimum)")
        if any(c.availability is not None for c in crowd.fleet):
            raise InputError(path, f"instances.{k}", "churn is not modelled by the optimum")
        if swept_bandwidths(scenario):
            problem = "one bandwidth per instance (network.bandwidth_mbps; no sweeps)"
            raise InputError(path, f"instances.{k}", problem)
        if scenario.network.schedule:  # the schedulers' runs would play it, the optimum not
            problem = (
                "one bandwidth per instance (network.bandwidth_mbps; no network.schedule: "
                "the optimum is found at one rate)"
            )
            raise InputError(path, f"instances.{k}", problem)
        tasks = crowd.job.inputs * len(crowd.job.stages)
        if tasks > MAX_OPTIMUM_TASKS:
            problem = f"{tasks} tasks (inputs x stages); the optimum takes {MAX_OPTIMUM_TASKS}"
            raise InputError(path, f"instances.{k}", problem)
        scenario = scenario.model_copy(
            update={"crowd": crowd.model_copy(update={"schedulers": settings.schedulers})}
        )
        prepare_crowd(scenario, scenario_path)  # its phone profiles: errors before any run
        if settings.mode == "emu":
            from edgetwin.evaluate.affinity_emu import check_emu_instance

            check_emu_instance(scenario, scenario_path, (path, f"instances.{k}"), machine)
        scenarios.append((scenario, scenario_path))
    return settings, scenarios


def _check_instance_names(instances: tuple[InstanceSpec, ...], path: Path) -> None:
    """Each instance's name once: it labels the instance's results (affinity.json, page)."""
    repeated = first_repeated([instance.name for instance in instances])
    if repeated is not None:
        k, name = repeated
        problem = f"instance {name!r} is given twice; give each instance its own name"
        raise InputError(path, f"instances.{k}.name", problem)


def _instance_scenario(
    base: dict[str, Any], instance: InstanceSpec, scenario_path: Path, where: tuple[Path, str]
) -> Scenario:
    """The base scenario with the instance's ``set`` applied. The base is valid, so an
    error is the instance's: it names the evaluation file and the instance (or its entry)."""
    path, name = where
    raw = _deep_copy(base)
    for j, item in enumerate(instance.set):
        apply_listed_override(raw, item, path, f"{name}.set.{j}")
    try:
        return validate_scenario(raw, scenario_path)
    except InputError as exc:
        raise InputError(path, name, as_scenario_problem(exc)) from None


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _noiseless(setup: CrowdSetup) -> CrowdSetup:
    """The same phones with no session-load noise (the optimum uses mean costs)."""
    classes = []
    for c in setup.classes:
        session = c.profile.session.model_copy(update={"load_cv": 0.0})
        classes.append(PhoneClass(c.spec, c.profile.model_copy(update={"session": session})))
    return replace(setup, classes=classes)


def evaluate_affinity(
    settings: AffinitySettings,
    scenarios: list[tuple[Scenario, Path]],
    on_instance: Advance | None = None,
) -> AffinityEvaluation:
    """Run every scheduler on every instance (twin or emulator) and find each optimum;
    ``on_instance`` is told each instance's name as it ends."""
    results = []
    warnings: list[str] = []
    for spec, (scenario, path) in zip(settings.instances, scenarios, strict=True):
        if settings.mode == "emu":
            from edgetwin.evaluate.affinity_emu import emu_warnings, evaluate_instance_emu

            warnings += emu_warnings(spec.name, scenario, path)
            results += evaluate_instance_emu(spec.name, scenario, path, settings.node_limit)
        else:
            results += _evaluate_instance_twin(spec.name, scenario, path, settings)
        if on_instance is not None:
            on_instance(spec.name)
    return AffinityEvaluation(settings, tuple(results), tuple(warnings))


def _evaluate_instance_twin(
    name: str, scenario: Scenario, path: Path, settings: AffinitySettings
) -> list[InstanceResult]:
    if settings.deterministic:
        scenario = scenario.model_copy(update={"noise_cv": 0.0})
    setup = prepare_crowd(scenario, path)
    if settings.deterministic:
        setup = _noiseless(setup)
    crowd = scenario.crowd
    assert crowd is not None
    results = []
    for strategy in (s.name for s in scenario.strategies):
        inst = build_instance(scenario, setup, strategy)
        best = optimum(inst, settings.node_limit)
        dispatch = optimum(inst, settings.node_limit, prefetch=False)
        per_scheduler = {}
        for scheduler in settings.schedulers:
            runs = [
                CrowdRun(strategy, scheduler, rep, scenario.network.bandwidth_mbps)
                for rep in range(settings.repetitions)
            ]
            rows = [simulate_crowd(scenario, setup, r).rows[0] for r in runs]
            for row in rows:
                _check_finished(row, name, (scenario, path), best)
            figures = [RunFigures.of_row(row) for row in rows]
            per_scheduler[scheduler] = scheduler_result(figures, best, dispatch)
        results.append(
            InstanceResult(
                name,
                strategy,
                tuple(p.name for p in inst.phones),
                crowd.job.inputs,
                len(crowd.job.stages),
                crowd.cache,
                best,
                dispatch,
                per_scheduler,
            )
        )
    return results


def _check_finished(
    row: ResultRow, name: str, scenario: tuple[Scenario, Path], best: Optimum
) -> None:
    """A scheduler's run finished its job, else an error naming the instance, how long the
    run had and the optimum's makespan: an unfinished job has no makespan to score."""
    if row.status == STATUS_OK:
        return
    spec, path = scenario
    crowd = spec.crowd
    assert crowd is not None
    problem = f"instance {name}: {row.scheduler}'s run ended with its job {row.status}"
    if not row.status.endswith(OUT_OF_TIME):
        raise InputError(path, "crowd", problem)
    run_s, optimum_s = crowd.horizon_s + crowd.drain_s, best.schedule.makespan_ms / 1e3
    problem += (
        f" ({exact_text(run_s)} s; the optimum's makespan is {figure_text(optimum_s)} s):"
        " give the instance more in its set (crowd.drain_s=...)"
    )
    raise InputError(path, "crowd.drain_s", problem)


def _optimum_json(found: Optimum, phones: tuple[str, ...]) -> dict[str, Any]:
    best = found.schedule
    return {
        "makespan_s": round(best.makespan_ms / 1e3, 6),
        "cold_loads": best.cold_loads,
        "warm_loads": best.warm_loads,
        "evictions": best.evictions,
        "bytes_moved": best.bytes_moved,
        "proved": found.proved,
        "nodes": found.nodes,
        "plan": _assignment_json(best.assignment, phones),
    }


def _replay_json(replay: AssignmentReplay | None, phones: tuple[str, ...]) -> dict[str, Any] | None:
    if replay is None:
        return None
    return {
        "pooled_costs_makespan_s": round(replay.pooled_s, 6),
        "own_costs_makespan_s": round(replay.own_s, 6),
        "plans": [_assignment_json(assignment, phones) for assignment in replay.assignments],
    }


def _assignment_json(assignment: Assignment, phones: tuple[str, ...]) -> dict[str, list[list[int]]]:
    return {p: [list(t) for t in tasks] for p, tasks in zip(phones, assignment, strict=True)}


def _instance_json(r: InstanceResult) -> dict[str, Any]:
    return {
        "instance": r.name,
        "strategy": r.strategy,
        "phones": list(r.phones),
        "inputs": r.inputs,
        "stages": r.stages,
        "cache": r.cache,
        "placements_measured": r.placements_measured,
        "optimum": _optimum_json(r.optimum, r.phones),
        "optimum_dispatch": _optimum_json(r.optimum_dispatch, r.phones),
        "schedulers": {
            name: {
                "makespan_s": round(s.makespan_s, 6),
                "makespan_max_s": round(s.makespan_max_s, 6),
                "cold_loads": s.cold_loads,
                "warm_loads": s.warm_loads,
                "evictions": s.evictions,
                "bytes_moved": s.bytes_moved,
                "regret_pct": round(s.regret_pct, 4),
                "regret_dispatch_pct": round(s.regret_dispatch_pct, 4),
                "replay": _replay_json(s.replay, r.phones),
            }
            for name, s in r.schedulers.items()
        },
    }

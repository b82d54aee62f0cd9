"""Loading a question file: read and check it, build the scenario it sweeps, dump it.

A question file is validated like a scenario: every error names the file and
the field and exits with status 2 (``InputError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from edgetwin.availability_spec import ConstantDist
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.errors import InputError
from edgetwin.file_kinds import check_kind, check_named_scenario
from edgetwin.models import registry
from edgetwin.number_text import counted
from edgetwin.plan.questions import (
    AXES_TAGS,
    BANDWIDTH_FREE,
    DECODER_METRICS,
    KINDS,
    QUESTION_TAGS,
    SHARED_SWEEP,
    AnyKind,
    Axes,
    Crossover,
    CrowdAxes,
    CrowdCapacity,
    PlanQuestion,
    SmallestFleet,
)
from edgetwin.scenario import Scenario
from edgetwin.schema import (
    apply_listed_override,
    apply_override,
    dump_yaml,
    first_repeated,
    load_yaml_model,
    read_yaml_mapping,
    referenced_file,
    validate_model,
    validation_error,
)
from edgetwin.sim.crowd.runner import prepare_crowd
from edgetwin.sim.fleet import build_fleet
from edgetwin.sweep_points import override_key, unread_override


@dataclass(frozen=True)
class LoadedQuestion:
    """A question file resolved: the question and the scenario it sweeps."""

    path: Path
    question: PlanQuestion
    scenario: Scenario
    scenario_path: Path
    # the most devices the file's own axes run, before the caller's overrides (--set): a
    # narrower sweep of theirs is on purpose (0: a crowd question, which has no devices)
    devices_in_file: int


def load_question(path: Path, overrides: tuple[str, ...] = ()) -> LoadedQuestion:
    """Read and validate a question file and build the scenario it sweeps."""
    check_kind(path, "plan")
    question = _read_question(path, overrides)
    _check_axes_fit_the_question(question, path)
    _check_set_kept(question, path)
    scenario_path = referenced_file(question.scenario, path.resolve().parent, path, "scenario")
    scenario_raw = read_yaml_mapping(scenario_path)
    check_named_scenario(scenario_raw, scenario_path, path, "scenario")
    for j, item in enumerate(question.set):  # an error names the item, not a scenario field
        apply_listed_override(scenario_raw, item, path, f"set.{j}")
    scenario_raw["mode"] = "twin"  # where a plan sweeps, whatever mode the scenario runs in
    scenario_raw.pop("reference", None)  # a plan compares nothing with measured rows
    if isinstance(question.axes, CrowdAxes):
        _as_crowd_sweep(scenario_raw, question, path)
    elif scenario_raw.get("crowd") is not None:  # before its strategies are replaced
        raise InputError(path, "scenario", "a crowd scenario answers only crowd_capacity")
    else:
        scenario_raw["sweeps"] = [question.axes.model_dump(mode="json", exclude_defaults=True)]
    strategies = _strategies(question.kinds[0])
    if strategies is not None:
        scenario_raw["strategies"] = strategies
    try:
        scenario = Scenario.model_validate(scenario_raw)
    except ValidationError as exc:
        raise _as_swept(validation_error(exc, path, Scenario), question.scenario) from None
    _check_set_read(question, scenario, path)
    if question.crowd:
        _check_crowd(scenario, path)
        prepare_crowd(scenario, scenario_path)  # profiles and trace: errors before any run
    elif question.searches_context and not isinstance(scenario.model, DecoderSpec):
        raise InputError(path, "question", "longest_context needs a decoder scenario")
    else:
        _check_decoder_metrics(question, scenario, path)
        build_fleet(scenario, scenario_path)  # its device profiles: errors before any run
    devices = _devices_in_file(path, question, overrides)
    return LoadedQuestion(path, question, scenario, scenario_path, devices)


def _read_question(path: Path, overrides: tuple[str, ...]) -> PlanQuestion:
    """The question file with ``overrides`` applied, validated. An override's error names
    its key as given (``axes.devices.7``); a validation error's field leaves the model's
    tags out (``_without_tags``), which an override's key has none of."""
    raw = read_yaml_mapping(path)
    try:
        for item in overrides:
            apply_override(raw, item, path)
    except InputError as exc:
        raise _scenario_key_hint(exc) from None
    try:
        return validate_model(PlanQuestion, raw, path)
    except InputError as exc:
        raise _scenario_key_hint(_without_tags(exc)) from None


def _devices_in_file(path: Path, question: PlanQuestion, overrides: tuple[str, ...]) -> int:
    """The largest of ``axes.devices`` as the question file gives it, without
    ``overrides`` (those of ``question``, where none changes the axes or the file alone is
    no question: the overrides mend it); 0 for a crowd question."""
    if not isinstance(question.axes, Axes):
        return 0
    if any(override_key(item).split(".")[0] == "axes" for item in overrides):
        try:
            own = load_yaml_model(path, PlanQuestion)
        except InputError:
            own = question
        if isinstance(own.axes, Axes):
            return max(own.axes.devices)
    return max(question.axes.devices)


def dump_question(question: PlanQuestion, scenario_file: str) -> str:
    """The question as YAML that sweeps ``scenario_file`` (a resolved scenario: its ``set``
    overrides already applied, so none are listed), the question's own defaults left out."""
    raw = question.model_dump(mode="json", exclude_defaults=True)
    raw["scenario"] = scenario_file
    raw.pop("set", None)
    return dump_yaml(raw)


def _check_axes_fit_the_question(question: PlanQuestion, path: Path) -> None:
    """A list of questions that can share one sweep, and the axes their kind sweeps; the
    errors name ``question`` or ``axes`` (raised by the model, they named no field)."""
    kinds = question.kinds
    if not kinds:
        raise InputError(path, "question", "a list needs at least one question")
    if len(kinds) > 1 and not all(k.kind in SHARED_SWEEP for k in kinds):
        problem = f"a list shares one sweep: only {', '.join(SHARED_SWEEP)}"
        raise InputError(path, "question", problem)
    repeated = first_repeated(kinds)
    if repeated is not None:  # its answer was given twice
        index, kind = repeated
        raise InputError(path, f"question.{index}", f"this {kind.kind} question is asked twice")
    axes, crowd = question.axes, question.crowd
    if crowd != isinstance(axes, CrowdAxes):
        wanted = "fleet_size" if crowd else "batch and bandwidth_mbps"
        raise InputError(path, "axes", f"axes of a {kinds[0].kind} question are {wanted}")
    several = isinstance(axes, Axes) and (
        len(axes.prompt_tokens) > 1 or len(axes.output_tokens) > 1
    )
    single_workload = [k.kind for k in kinds if k.kind not in SHARED_SWEEP]
    if several and single_workload:
        problem = f"{single_workload[0]} takes one prompt and output length"
        raise InputError(path, "axes", problem)
    by_bandwidth = [k.kind for k in kinds if k.kind not in BANDWIDTH_FREE]
    if isinstance(axes, Axes) and not axes.bandwidth_mbps and by_bandwidth:
        problem = (
            f"required key is missing: {by_bandwidth[0]} answers per bandwidth (only "
            f"{', '.join(BANDWIDTH_FREE)}, whose answer no bandwidth changes, runs without it)"
        )
        raise InputError(path, "axes.bandwidth_mbps", problem)


_BY_SHARE = (
    "crowd_capacity scales classes given by 'share', adding up to 1 (count: a fixed fleet; "
    "scenarios/crowd_city.yaml gives shares)"
)


def _as_crowd_sweep(scenario_raw: dict[str, Any], question: PlanQuestion, path: Path) -> None:
    """The scenario at the largest swept fleet, with the question's scheduler."""
    assert isinstance(question.axes, CrowdAxes) and isinstance(question.question, CrowdCapacity)
    crowd = scenario_raw.get("crowd")
    if not isinstance(crowd, dict):
        raise InputError(path, "scenario", "crowd_capacity needs a crowd scenario")
    fleet = crowd.get("fleet")
    if not isinstance(fleet, list) or not all(isinstance(c, dict) and "share" in c for c in fleet):
        raise InputError(path, "crowd.fleet", _BY_SHARE)  # before fleet_size, which needs one
    crowd["fleet_size"] = question.axes.fleet_size[-1]
    crowd["schedulers"] = [question.question.scheduler]
    if question.axes.bandwidth_mbps:
        scenario_raw["sweeps"] = [{"bandwidth_mbps": list(question.axes.bandwidth_mbps)}]


def _replaced_keys(question: PlanQuestion) -> dict[str, str]:
    """The scenario keys the plan sets itself, whatever the scenario says, each with what
    sets it and where to say it instead."""
    replaced = {"mode": "a plan sweeps in the twin (edgetwin run --mode runs the others)"}
    if isinstance(question.axes, CrowdAxes):
        replaced["crowd.fleet_size"] = "the axes give fleet_size; sweep its values there instead"
        replaced["crowd.schedulers"] = "the question gives it: question.scheduler"
        if question.axes.bandwidth_mbps:
            replaced["sweeps"] = "the axes give bandwidth_mbps; sweep its values there instead"
    else:
        replaced["sweeps"] = "the axes replace the scenario's sweeps; sweep there instead"
    if _strategies(question.kinds[0]) is not None:
        replaced["strategies"] = "the question gives them: question.strategy"
    return replaced


def _check_set_kept(question: PlanQuestion, path: Path) -> None:
    """Refuse a ``set`` item of a key the plan sets itself (``_replaced_keys``): the sweep
    replaced it without a word (``crowd.fleet_size=3`` swept the axes' fleet sizes)."""
    replaced = _replaced_keys(question)
    for index, item in enumerate(question.set):
        key = override_key(item)
        for name, why in replaced.items():
            if key == name or key.startswith(f"{name}."):
                raise InputError(path, f"set.{index}", f"{key} has no effect: {why}")


def unrun_devices(loaded: LoadedQuestion) -> list[str]:
    """Warnings for the ``set`` items ``devices.N.count=K`` that size devices no run takes:
    a run takes the fleet's first devices, as many as its configuration has, at most the
    largest of ``axes.devices`` (``devices.0.count=3`` swept on ``devices: [2]`` ran 2).
    Devices that the file's own axes run are not warned of: the caller narrowed the axes
    on purpose (``--set "axes.devices=[2]"`` for a quick look at an 8-board plan)."""
    question, scenario = loaded.question, loaded.scenario
    if not isinstance(question.axes, Axes):
        return []
    most = max(question.axes.devices)
    warnings = []
    for index, item in enumerate(question.set):
        parts = override_key(item).split(".")
        if len(parts) != 3 or parts[0] != "devices" or parts[2] != "count":
            continue
        group = int(parts[1])  # an index the scenario has: it validated
        first = sum(d.count for d in scenario.devices[:group])
        end = first + scenario.devices[group].count
        if end <= max(most, loaded.devices_in_file):
            continue
        unused = end - max(first, most)
        fleet = sum(d.count for d in scenario.devices)
        them = "it" if unused == 1 else "them"
        warnings.append(
            f"{item} (set.{index}) sizes a fleet of {fleet}, but a run takes its first devices, "
            f"as many as axes.devices gives, at most {most}: {counted(unused, 'device')} of "
            f"devices.{group} never {'runs' if unused == 1 else 'run'} (sweep {end} in "
            f"axes.devices to run {them})"
        )
    return warnings


def _check_set_read(question: PlanQuestion, scenario: Scenario, path: Path) -> None:
    """Refuse a ``set`` item that no run of the sweep reads (``unread_override``): the axes
    give their own bandwidths (``set: [network.bandwidth_mbps=200]`` ran none at 200)."""
    found = unread_override(scenario, question.set)
    if found is None:
        return
    index, swept = found
    axes = not isinstance(question.axes, CrowdAxes) or bool(question.axes.bandwidth_mbps)
    gives = f"the axes give {swept.swept}" if axes else f"the scenario's {swept.fields} give it"
    key = override_key(question.set[index])
    problem = f"{key} has no effect: {gives}; sweep its values there instead"
    raise InputError(path, f"set.{index}", problem)


def _check_decoder_metrics(question: PlanQuestion, scenario: Scenario, path: Path) -> None:
    """A best_mode metric that only a decoder's rows carry needs a decoder scenario."""
    if isinstance(scenario.model, DecoderSpec):
        return
    listed = isinstance(question.question, tuple)
    for index, kind in enumerate(question.kinds):
        wrong = [m for m in getattr(kind, "metrics", ()) if m in DECODER_METRICS]
        if wrong:
            field = f"question.{index}.metrics" if listed else "question.metrics"
            raise InputError(
                path, field, f"{wrong[0]} is a decoder metric; this scenario's model is not one"
            )


def _check_crowd(scenario: Scenario, path: Path) -> None:
    """A crowd question needs share-sized classes and jobs arriving at a constant interval."""
    crowd = scenario.crowd
    assert crowd is not None  # _as_crowd_sweep checked
    shares = [c.share for c in crowd.fleet]
    if None in shares or abs(sum(s or 0 for s in shares) - 1) > 1e-9:
        raise InputError(path, "crowd.fleet", _BY_SHARE)
    if not isinstance(crowd.job.interarrival, ConstantDist):
        raise InputError(
            path, "crowd.job.interarrival", "crowd_capacity needs {kind: constant, value_s: T}"
        )


def _scenario_key_hint(error: InputError) -> InputError:
    """An error under a key of the scenario's that the question lacks (``--set
    crowd.job...`` on a plan: an unknown key; ``--set devices.0.count=3``: an index into a
    list the question has none of) says how the scenario is changed: through the
    question's ``set`` list."""
    first = (error.field or "").split(".")[0]
    if first not in Scenario.model_fields or first in PlanQuestion.model_fields:
        return error
    problem = (
        f"unknown key of the question ({first!r} is the scenario's: change it through the "
        'question\'s set list, --set "set.N=KEY=VALUE" for its Nth item or '
        '--set "set=[...]" for the whole list)'
    )
    return InputError(error.path, error.field, problem)


def _without_tags(error: InputError) -> InputError:
    """``axes.devices.batch.0`` -> ``axes.batch.0``, ``question.one.kind`` ->
    ``question.kind``, ``question.list.1.kind`` -> ``question.1.kind``,
    ``question.one.crossover.strategy`` -> ``question.strategy``: the shape of the axes or
    the question and the question's kind are not keys."""
    field = error.field or ""
    for key, tags in (("axes", AXES_TAGS), ("question", QUESTION_TAGS)):
        for tag in tags:
            if field == f"{key}.{tag}" or field.startswith(f"{key}.{tag}."):
                field = key + field.removeprefix(f"{key}.{tag}")
    parts = field.split(".")
    at = 2 if len(parts) > 2 and parts[0] == "question" and parts[1].isdigit() else 1
    if parts[0] == "question" and len(parts) > at and parts[at] in KINDS:
        field = ".".join(parts[:at] + parts[at + 1 :])
    return InputError(error.path, field or error.field, error.problem)


def _as_swept(error: InputError, scenario: str) -> InputError:
    """A scenario error after overrides: the sweep and its fields are the question's axes
    (a message may start with the field, ``sweeps.0.devices asks for ...`` or
    ``sweeps.0.devices: pipeline on 20: ...``)."""
    field, problem = error.field, error.problem
    if field is None and problem.startswith("sweeps.0"):
        field, _, problem = problem.partition(" ")
        field = field.removesuffix(":")
    if field is not None and (field == "sweeps.0" or field.startswith("sweeps.0.")):
        return InputError(error.path, "axes" + field.removeprefix("sweeps.0"), problem)
    return InputError(error.path, field, f"{problem} (scenario {scenario} with 'set' applied)")


def _strategies(kind: AnyKind) -> list[dict[str, Any]] | None:
    """The strategies the sweep runs; None keeps the scenario's own."""
    if isinstance(kind, CrowdCapacity):
        return [{"name": kind.strategy}]
    if isinstance(kind, SmallestFleet | Crossover):  # both answer against one device too
        baseline = {"name": registry.baseline().name}
        return [baseline, kind.strategy.model_dump(mode="json", exclude_defaults=True)]
    return None

"""The loading step of a run: the scenario and every file it names, checked before
anything runs or is written (``edgetwin run --check`` stops after it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgetwin import scenario as scenario_file
from edgetwin.comparison import check_reference
from edgetwin.profile import PROFILE_DIR
from edgetwin.scenario import Scenario
from edgetwin.schema import apply_override, referenced_file, validate_model
from edgetwin.sim.crowd.runner import prepare_crowd
from edgetwin.sim.runner import build_fleet


@dataclass(frozen=True)
class RunInputs:
    """A scenario checked with its files: profiles, availability trace, reference table."""

    scenario: Scenario
    path: Path | None  # the scenario's file; None for a Scenario built in memory
    reference: Path | None  # the results table to compare against, checked as one


def load_run_inputs(path: Path, overrides: Sequence[str] = ()) -> RunInputs:
    """Read, override and validate ``path``, then check every file it names; every
    error is an ``InputError`` naming the file and the field."""
    return check_run_inputs(scenario_file.load_scenario(path, overrides), path)


def scenario_run_inputs(scenario: Scenario, overrides: Sequence[str] = ()) -> RunInputs:
    """A Scenario in memory, overridden and checked like a file (its relative file names
    are relative to the current folder)."""
    label = f"<scenario {scenario.name}>"
    if overrides:
        raw = scenario.model_dump(mode="json")
        for item in overrides:
            apply_override(raw, item, Path(label))
        scenario = validate_model(Scenario, raw, label)
    return check_run_inputs(scenario, None)


def check_run_inputs(scenario: Scenario, path: Path | None) -> RunInputs:
    """Check every file ``scenario`` names (relative to ``path``'s folder, or to the current
    folder when there is no file)."""
    named_by = path if path is not None else Path(f"<scenario {scenario.name}>")
    reference = None
    if scenario.reference is not None:
        base = path.resolve().parent if path is not None else Path.cwd()
        reference = referenced_file(scenario.reference, base, named_by, "reference")
        check_reference(reference, named_by, "reference")
    if scenario.crowd is not None:
        prepare_crowd(scenario, path)  # phone profiles, schedulers, availability trace
    else:
        build_fleet(scenario, path)  # device profiles
    return RunInputs(scenario, path, reference)


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """A scenario file, overridden (``key.sub=value``, as ``--set``) and validated, its
    files checked; the files it names become absolute, so that the Scenario runs from any
    folder."""
    path = Path(path)
    scenario = load_run_inputs(path, overrides).scenario
    return _with_absolute_files(scenario, path.resolve().parent)


def _with_absolute_files(scenario: Scenario, base: Path) -> Scenario:
    """``scenario`` with its reference, profile files and availability trace made absolute
    (shipped profile names stay names)."""

    def absolute(name: str) -> str:
        return name if Path(name).is_absolute() else str(base / name)

    def profile(name: str) -> str:
        return name if (PROFILE_DIR / f"{name}.yaml").is_file() else absolute(name)

    devices = tuple(
        d.model_copy(update={"profile": profile(d.profile)}) if isinstance(d.profile, str) else d
        for d in scenario.devices
    )
    update: dict[str, object] = {"devices": devices}
    if scenario.reference is not None:
        update["reference"] = absolute(scenario.reference)
    crowd = scenario.crowd
    if crowd is not None:
        fleet = tuple(p.model_copy(update={"profile": profile(p.profile)}) for p in crowd.fleet)
        trace = crowd.availability_trace
        crowd_update: dict[str, object] = {"fleet": fleet}
        if trace is not None:
            crowd_update["availability_trace"] = absolute(trace)
        update["crowd"] = crowd.model_copy(update=crowd_update)
    return scenario.model_copy(update=update)

"""The loading step of a run: the scenario and every file it names, checked before
anything runs or is written (``edgetwin run --check`` stops after it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from edgetwin import scenario as scenario_file
from edgetwin.comparison import check_reference
from edgetwin.errors import InputError
from edgetwin.file_kinds import check_kind
from edgetwin.provenance import recording_reads
from edgetwin.scenario import Scenario
from edgetwin.scenario_paths import with_absolute_paths
from edgetwin.schema import apply_override, referenced_file, validate_model
from edgetwin.sim.crowd.runner import prepare_crowd
from edgetwin.sim.fleet import build_fleet
from edgetwin.sweep_points import check_overrides_read
from edgetwin.workbench.arguments import overrides_argument, path_argument


@dataclass(frozen=True)
class RunInputs:
    """A scenario checked with its files: profiles, availability trace, reference table."""

    scenario: Scenario
    path: Path | None  # the scenario's file; None for a Scenario built in memory
    reference: Path | None  # the results table to compare against, checked as one
    files: dict[str, str]  # every file read, as opened: its SHA-256

    @property
    def named_from(self) -> Path:
        """The path the scenario's relative file names are relative to (its file, or a
        stand-in in the current folder for a Scenario built in memory)."""
        return self.path if self.path is not None else Path.cwd() / "scenario.yaml"


def load_run_inputs(path: Path, overrides: Sequence[str] = ()) -> RunInputs:
    """Read, override and validate ``path``, then check every file it names; every
    error is an ``InputError`` naming the file and the field."""
    check_kind(path, "scenario")  # an evaluation or a plan names the command it belongs to
    with recording_reads() as files:
        scenario = scenario_file.load_scenario(path, overrides)
        check_overrides_read(scenario, overrides, path)
        return _checked(scenario, path, files)


def scenario_run_inputs(scenario: Scenario, overrides: Sequence[str] = ()) -> RunInputs:
    """A Scenario in memory, overridden and validated like a file (one made with
    ``model_copy(update=...)`` was not), then checked (its relative file names are
    relative to the current folder)."""
    label = Path(f"<scenario {scenario.name}>")
    try:
        raw = scenario.model_dump(mode="json", warnings=False)
    except PydanticSerializationError as exc:
        raise InputError(label, None, f"cannot be read as a scenario: {exc}") from None
    _put_back_unknown_keys(scenario, raw)
    for item in overrides:
        apply_override(raw, item, label)
    scenario = validate_model(Scenario, raw, label)
    check_overrides_read(scenario, overrides, label)
    with recording_reads() as files:
        return _checked(scenario, None, files)


def _put_back_unknown_keys(model: BaseModel, raw: dict[str, Any]) -> None:
    """Put into ``raw`` (``model``'s dump) the attributes that ``model_copy(update=...)``
    set and no field of the model has (the dump drops them: ``{"sed": 5}`` was run with
    the seed unchanged), so that validation names each as a file's unknown key."""
    fields = type(model).model_fields
    for name, value in vars(model).items():
        if name not in fields:
            raw[name] = None  # its value does not matter: the key is refused
            continue
        dumped = raw.get(name)
        if isinstance(value, BaseModel) and isinstance(dumped, dict):
            _put_back_unknown_keys(value, dumped)
        elif isinstance(value, list | tuple) and isinstance(dumped, list):
            for item, item_dumped in zip(value, dumped, strict=False):
                if isinstance(item, BaseModel) and isinstance(item_dumped, dict):
                    _put_back_unknown_keys(item, item_dumped)


def _checked(scenario: Scenario, path: Path | None, files: dict[str, str]) -> RunInputs:
    """Check every file ``scenario`` names (relative to ``path``'s folder, or to the current
    folder when there is no file); ``files`` records what was read."""
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
    return RunInputs(scenario, path, reference, files)


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """A scenario file, overridden (``key.sub=value``, as ``--set``) and validated, its
    files checked; the files it names become absolute, so that the Scenario runs from any
    folder."""
    path = path_argument(path, "path")
    scenario = load_run_inputs(path, overrides_argument(overrides)).scenario
    return with_absolute_paths(scenario, path)

"""What kind of input file a path holds (scenario, evaluation, plan question, calibration
spec), decided from its top-level keys and then its suffix, and the command each kind
belongs to.

Every loader of one of these files checks its kind first (``check_kind``), so that a file
given to the wrong command or function is one line naming the right one, not a
missing-field error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from edgetwin.errors import InputError
from edgetwin.schema import read_yaml_mapping

Kind = Literal["scenario", "evaluation", "affinity", "plan", "calibration", "profile"]
ProfileKind = Literal["device", "phone"]
# the top-level key that tells a profile's kind: a device's compute section, a phone's CPU
PROFILE_KIND_KEYS: dict[ProfileKind, str] = {"device": "compute", "phone": "cpu_gflops"}
# what a calibration spec's ``kind`` may be (an Android spec has none: its keys tell)
CALIBRATION_KINDS = ("table", "traces", "emu")


@dataclass(frozen=True)
class KindInfo:
    """How a kind is named in a message, the command that reads it and its function in
    the Python API (None: no command reads it; ``use`` says what does)."""

    noun: str
    command: str | None
    function: str | None = None
    use: str = ""


KINDS: dict[Kind, KindInfo] = {
    "scenario": KindInfo("a scenario", "run", "run"),
    "evaluation": KindInfo("an evaluation of the adaptive policy", "evaluate", "evaluate_adaptive"),
    "affinity": KindInfo(
        "an evaluation of crowd schedulers", "evaluate-affinity", "evaluate_affinity"
    ),
    "plan": KindInfo("a plan question", "plan", "run_plan"),
    "calibration": KindInfo("a calibration spec", "calibrate", "calibrate"),
    "profile": KindInfo(
        "a device profile", None, None, "a scenario names it (devices.N.profile: its path)"
    ),
}

_SCENARIO_KEYS = frozenset({"strategies", "model", "devices", "network", "crowd", "sweeps"})
# a scenario's keys that no profile has (a profile has a network section too)
_SCENARIO_ONLY_KEYS = _SCENARIO_KEYS - {"network"}
# a device's (compute) or a phone's (cpu_gflops) profile: its facts at the top level
_PROFILE_KEYS = frozenset(PROFILE_KIND_KEYS.values())


def kind_of_mapping(raw: dict[str, Any], path: Path) -> Kind | None:
    """The kind of a file's top-level mapping; its suffix decides when the keys do not;
    None when neither does (the command's own loader then says what is wrong)."""
    if "axes" in raw or "question" in raw:
        return "plan"
    if "instances" in raw or "schedulers" in raw:
        return "affinity"
    if "held_out" in raw or "map_table" in raw or "policies" in raw:
        return "evaluation"
    if raw.get("kind") in CALIBRATION_KINDS or "phone_classes" in raw:
        return "calibration"
    if "profile" in raw and "strategies" not in raw:  # a table spec (its kind is optional)
        return "calibration"
    if "ram_mb" in raw and raw.keys() & _PROFILE_KEYS:  # before its network section counts
        return "profile"
    if "scenario" not in raw and raw.keys() & _SCENARIO_KEYS:
        return "scenario"
    name = path.name.lower()
    if name.endswith((".plan.yaml", ".plan.yml")):
        return "plan"
    if name.endswith((".eval.yaml", ".eval.yml")):
        return "evaluation"
    return None


def kind_of_file(path: Path) -> Kind | None:
    """The kind of the file at ``path``; None when it is not a YAML mapping or its keys and
    suffix do not tell."""
    try:
        raw = read_yaml_mapping(path)
    except InputError:
        return None
    return kind_of_mapping(raw, path)


def refuse_a_command_file(raw: dict[str, Any], path: Path, kind: ProfileKind) -> None:
    """A command's input file read where a ``kind`` profile is (a scenario, a calibration
    spec, a plan question, an evaluation) is one line naming its command, not a profile's
    missing key (``ram_mb``). A scenario by a key no profile has: a profile written by hand
    and missing keys may look like one by its ``network`` section alone."""
    found = kind_of_mapping(raw, path)
    scenario = found == "scenario" and bool(raw.keys() & _SCENARIO_ONLY_KEYS)
    if found not in (None, "scenario", "profile") or scenario:
        assert found is not None
        raise InputError(path, None, _this_is(path, found, f", not a {kind} profile"))


def _this_is(path: Path, found: Kind, not_what: str = "") -> str:
    """``this is a scenario[, not_what]: use `edgetwin run PATH` (edgetwin.run in Python)``."""
    info = KINDS[found]
    use = info.use
    if info.command is not None:
        use = f"use `edgetwin {info.command} {path}` (edgetwin.{info.function} in Python)"
    return f"this is {info.noun}{not_what}: {use}"


def check_kind(path: Path, expected: Kind) -> None:
    """An ``InputError`` naming the command and the function that read ``path`` when it
    holds another kind of file than ``expected``; a file that cannot be read is left to
    the loader."""
    found = kind_of_file(path)
    if found is None or found == expected:
        return
    raise InputError(path, None, _this_is(path, found, f", not {KINDS[expected].noun}"))


def not_a_run_folder(path: Path, tables: tuple[str, ...]) -> str:
    """What to say of a file given where a run's output folder is read (``report``,
    ``compare``, ``load_results``): the command of a scenario or another input file, the
    folder of a results table (one of ``tables``), else that a folder is wanted."""
    if path.name in tables:
        return f"a results table: give its folder, {path.parent}"
    found = kind_of_file(path)
    if found is not None:
        return (
            f"{_this_is(path, found)} (a run's output folder, one with {tables[0]}, is read here)"
        )
    return f"a file, not a run's output folder (one with {tables[0]})"


def check_named_scenario(raw: dict[str, Any], path: Path, named_by: Path, field: str) -> None:
    """An ``InputError`` naming ``named_by``'s ``field`` when the file it names as its
    scenario (``path``, read as ``raw``) is another kind of file: not a missing-field
    error about that file."""
    found = kind_of_mapping(raw, path)
    if found not in (None, "scenario"):
        problem = f"{path.name} is {KINDS[found].noun}, not a scenario"
        raise InputError(named_by, field, problem)

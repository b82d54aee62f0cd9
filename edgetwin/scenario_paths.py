"""The files a scenario names: the profiles and traces its runs read, made absolute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgetwin.device_spec import DeviceSpec
from edgetwin.errors import InputError
from edgetwin.file_kinds import ProfileKind
from edgetwin.profile import PROFILE_DIR, DeviceProfile, load_profile, profile_path
from edgetwin.scenario import Scenario


def files_of_runs(scenario: Scenario, scenario_path: Path) -> list[Path]:
    """Every file the scenario's runs read, which their rows depend on: the device and
    phone profiles (shipped ones too) and the availability trace (not the reference:
    it changes no row)."""
    base = scenario_path.resolve().parent
    files = [profile_path(d.profile, base) for d in scenario.devices if isinstance(d.profile, str)]
    crowd = scenario.crowd
    if crowd is not None:
        files += [profile_path(c.profile, base, "phone") for c in crowd.fleet]
        if crowd.availability_trace is not None:
            files.append(base / crowd.availability_trace)
    return files


def device_profile(spec: DeviceSpec, index: int, scenario_path: Path | None) -> DeviceProfile:
    """The profile of ``scenario_path``'s device class ``index`` (a path relative to that
    file's folder); an InputError naming the profile file, or the field that names it."""
    if isinstance(spec.profile, DeviceProfile):
        return spec.profile
    base = None if scenario_path is None else scenario_path.resolve().parent
    try:
        return load_profile(spec.profile, base)
    except InputError as exc:
        if exc.path is not None:  # the profile file itself is wrong: it names itself
            raise
        raise InputError(scenario_path, f"devices.{index}.profile", exc.problem) from None


def with_absolute_paths(scenario: Scenario, scenario_path: Path) -> Scenario:
    """The scenario with every file it names (reference, profile files, availability trace)
    as an absolute path, so that it runs the same from any folder; relative paths were
    relative to ``scenario_path``'s folder. Shipped profile names stay names."""
    base = scenario_path.resolve().parent

    def profile(name: str, kind: ProfileKind) -> str:
        path = profile_path(name, base, kind)
        return name if path == PROFILE_DIR / f"{name}.yaml" else str(path.resolve())

    devices = tuple(
        d
        if isinstance(d.profile, DeviceProfile)
        else d.model_copy(update={"profile": profile(d.profile, "device")})
        for d in scenario.devices
    )
    update: dict[str, Any] = {"devices": devices}
    if scenario.reference is not None:
        update["reference"] = str((base / scenario.reference).resolve())
    crowd = scenario.crowd
    if crowd is not None:
        fleet = tuple(
            c.model_copy(update={"profile": profile(c.profile, "phone")}) for c in crowd.fleet
        )
        trace = crowd.availability_trace
        absolute = None if trace is None else str((base / trace).resolve())
        update["crowd"] = crowd.model_copy(update={"fleet": fleet, "availability_trace": absolute})
    return scenario.model_copy(update=update)

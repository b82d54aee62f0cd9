"""What a twin run's devices were: each device (or phone) class's profile name, as its
profile says it. ``scenario.resolved.yaml`` names a profile file by its path only, so a
run records the names in ``devices.yaml`` beside it: ``compare`` tells the devices apart
once those files are gone (a folder copied from another machine)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import InputError
from edgetwin.scenario import Scenario
from edgetwin.schema import dump_yaml, read_yaml_mapping

DEVICES_FILE = "devices.yaml"  # a twin run's device classes and their profiles' names


def profile_refs(raw: Mapping[str, Any]) -> list[tuple[str, object]]:
    """Each device (or phone) class of a resolved scenario (as read from YAML) and what it
    gives as its profile."""
    crowd = raw.get("crowd")
    classes = crowd.get("fleet", []) if isinstance(crowd, dict) else raw.get("devices", [])
    return [(str(c.get("name")), c.get("profile")) for c in classes if isinstance(c, dict)]


def profile_name(ref: object, folder: Path) -> str | None:
    """A profile's name: inline, shipped, or read from the file a path (relative to
    ``folder``) names; None for a file that cannot be read."""
    if isinstance(ref, dict):
        return str(ref.get("name", "inline"))
    text = str(ref)
    if not text.endswith((".yaml", ".yml")):
        return text
    path = Path(text) if Path(text).is_absolute() else folder / text
    try:
        return str(read_yaml_mapping(path).get("name", text)) if path.is_file() else None
    except InputError:
        return None


def device_names(scenario: Scenario) -> dict[str, str]:
    """A twin run's device classes and their profiles' names (the scenario's files by
    absolute path, as a run resolves them); none for a real run, which ran on this
    machine."""
    if scenario.mode != "twin":
        return {}
    refs = profile_refs(scenario.model_dump(mode="json"))
    named = {name: profile_name(ref, Path.cwd()) for name, ref in refs}
    return {name: profile for name, profile in named.items() if profile is not None}


def write_device_names(path: Path, names: Mapping[str, str]) -> None:
    """``devices.yaml``: each class's profile name."""
    write_text_atomic(path, dump_yaml(dict(names)))


def read_device_names(folder: Path) -> dict[str, str]:
    """A run folder's ``devices.yaml``; none without one (a folder an older edgetwin wrote);
    an InputError naming it and the class if it is not such a record."""
    path = folder / DEVICES_FILE
    if not path.exists():
        return {}
    names = read_yaml_mapping(path)
    for name, profile in names.items():
        if not isinstance(profile, str) or not profile:
            raise InputError(path, str(name), "not a profile name (a device class: its name)")
    return {str(name): profile for name, profile in names.items()}

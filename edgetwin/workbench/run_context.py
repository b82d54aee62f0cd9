"""A run folder's context files beside its results table: ``scenario.resolved.yaml``,
``provenance.json`` and ``devices.yaml``. Each is optional (an older edgetwin, a folder of
copied results); one that is there and does not read is an ``InputError`` naming it, for
every reader of run folders alike (``load_results``, ``report``, ``compare``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgetwin.device_names import read_device_names
from edgetwin.provenance import read_provenance
from edgetwin.resolved_scenario import RESOLVED_FILE, resolved_scenario
from edgetwin.scenario import Scenario
from edgetwin.schema import read_yaml_mapping


@dataclass(frozen=True)
class RunContext:
    """What a run folder's context files hold; None (or empty) for one it does not have."""

    scenario: Scenario | None
    resolved: dict[str, Any] | None  # scenario.resolved.yaml's mapping as read
    provenance: dict[str, Any] | None
    device_names: dict[str, str]


def read_run_context(folder: Path) -> RunContext:
    """``folder``'s ``scenario.resolved.yaml``, ``provenance.json`` and ``devices.yaml``,
    each checked (an InputError naming the file, and the field where one is wrong)."""
    path = folder / RESOLVED_FILE
    raw = read_yaml_mapping(path) if path.exists() else None
    scenario = None if raw is None else resolved_scenario(raw, path)
    return RunContext(scenario, raw, read_provenance(folder), read_device_names(folder))

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
from edgetwin.resolved_scenario import RESOLVED_FILE, load_resolved
from edgetwin.scenario import Scenario


@dataclass(frozen=True)
class RunContext:
    """What a run folder's context files hold; None (or empty) for one it does not have."""

    scenario: Scenario | None
    provenance: dict[str, Any] | None
    device_names: dict[str, str]


def read_run_context(folder: Path) -> RunContext:
    """``folder``'s ``scenario.resolved.yaml``, ``provenance.json`` and ``devices.yaml``,
    each checked (an InputError naming the file, and the field where one is wrong)."""
    resolved = folder / RESOLVED_FILE
    scenario = load_resolved(resolved) if resolved.exists() else None
    return RunContext(scenario, read_provenance(folder), read_device_names(folder))

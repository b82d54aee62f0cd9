"""A run folder's copy of its scenario as it ran (``RESOLVED_FILE``): writing and reading."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.scenario import Scenario, validate_scenario
from edgetwin.schema import dump_yaml, read_yaml_mapping
from edgetwin.sweep_spec import DECODER_SWEEP_KEYS, SWEEP_OPTIONAL_LISTS

RESOLVED_FILE = "scenario.resolved.yaml"  # an output folder's scenario as it ran


def load_resolved(path: Path) -> Scenario:
    """A run folder's ``scenario.resolved.yaml`` (``resolved_scenario``)."""
    return resolved_scenario(read_yaml_mapping(path), path)


def resolved_scenario(read: Mapping[str, Any], path: Path) -> Scenario:
    """The scenario of ``path``, a run folder's ``scenario.resolved.yaml``, from its mapping
    as read (``read``, left as it is). One written before an empty sweep list was refused
    holds ``[]`` where the sweep left the list out (every crowd run's ``bandwidth_mbps``):
    read as left out, so that older folders still load."""
    raw = copy.deepcopy(dict(read))
    sweeps = raw.get("sweeps")
    for sweep in sweeps if isinstance(sweeps, list) else ():
        if isinstance(sweep, dict):
            for key in [k for k in SWEEP_OPTIONAL_LISTS if sweep.get(k) == []]:
                del sweep[key]
    return validate_scenario(raw, path)


def dump_resolved(scenario: Scenario) -> str:
    """The validated scenario as YAML, every default filled in but a sweep's lists left out
    (``optional_values``: they stay out, as ``[]`` is refused), an encoder's without the
    decoder-only keys, as before decoders."""
    raw = scenario.model_dump(mode="json")
    if not isinstance(scenario.model, DecoderSpec):
        del raw["workload"]
        for sweep in raw["sweeps"]:
            for key in DECODER_SWEEP_KEYS:
                sweep.pop(key, None)  # left out of the dump when not given
    return dump_yaml(raw)

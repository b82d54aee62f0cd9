"""The Python API as a user meets it: a Scenario changed in memory is validated as a file
is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import edgetwin
from edgetwin.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
JETSON = ROOT / "scenarios" / "prism_jetson.yaml"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("update", "field"),
    [({"mode": "bogus"}, "mode"), ({"seed": -1}, "seed"), ({"sweeps": "x"}, "sweeps")],
    ids=["mode", "seed", "sweeps"],
)
def test_a_scenario_copied_with_bad_values_is_refused(
    update: dict[str, Any], field: str, tmp_path: Path
) -> None:
    """``model_copy(update=...)`` does not validate, and a Scenario run as it is (mode=None,
    no seed, no overrides) was not validated again: mode 'bogus' ran local processes, a
    negative seed was numpy's ValueError, sweeps 'x' an AttributeError from the runner."""
    changed = edgetwin.load_scenario(JETSON).model_copy(update=update)
    out = tmp_path / "out"
    with pytest.raises(InputError) as raised:
        edgetwin.run(changed, mode=None, out=out)
    assert raised.value.field == field
    assert raised.value.path == "<scenario prism_jetson>"
    assert not out.exists()

"""``edgetwin.validate``: a calibration's held-out errors from Python, as
``edgetwin validate`` computes and writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError

SPECS = Path(__file__).resolve().parents[1] / "edgetwin" / "calibration" / "specs"
JETSON_SPEC = SPECS / "jetson_orin_nano.yaml"


@pytest.mark.timeout(300)
def test_validate_returns_what_the_command_writes(tmp_path: Path) -> None:
    assert main(["validate", str(JETSON_SPEC), "--out", str(tmp_path / "cli")]) == 0
    validation = edgetwin.validate(JETSON_SPEC, out=tmp_path / "api")
    for name in ("validation.csv", "validation.json"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    written = json.loads((tmp_path / "api" / "validation.json").read_text())
    assert validation.summary == written
    rows = (tmp_path / "cli" / "validation.csv").read_text().splitlines()[1:]
    assert len(validation.points) == len(rows) > 0  # a point a row of validation.csv
    recorded = json.loads((tmp_path / "api" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.validate", str(JETSON_SPEC), "by=batch"]


@pytest.mark.timeout(120)
def test_bad_validate_arguments_name_the_argument_or_the_spec(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.validate(JETSON_SPEC, by="colour")  # type: ignore[arg-type]
    assert raised.value.field == "by"
    with pytest.raises(InputError) as raised:
        edgetwin.validate(JETSON_SPEC, by="bandwidth", out=tmp_path / "v")
    assert (raised.value.path, raised.value.field) == (str(JETSON_SPEC), "--by (by= in Python)")
    with pytest.raises(InputError) as raised:
        edgetwin.validate(SPECS / "android_crowdio.yaml")
    assert raised.value.field == "kind"
    assert not (tmp_path / "v").exists()

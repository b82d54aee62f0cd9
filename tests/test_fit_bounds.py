"""A fitted parameter that a bound of its least squares stopped (the data would take it
further) is named: a warning line per parameter, naming its bound and its fit, and a
record in the profile's ``fit.at_bound``. A fit that no bound stops names none."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import edgetwin
from edgetwin.calibration.fit_check import AtBoundWarning, at_bound, bound_record, with_at_bound
from edgetwin.calibration.group_fit import fit_groups
from edgetwin.cli import main
from edgetwin.profile import DeviceProfile, load_profile
from tests.conftest import PipedRun

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "edgetwin" / "calibration" / "specs"
EMU_MACHINE = REPO / "data" / "traces" / "emu-vit-loop-2026-12" / "machine"


def _spec(source: Path, tmp_path: Path, **changes: Any) -> Path:
    """``source`` with its files named by absolute path and ``changes`` made, in tmp_path."""
    raw = yaml.safe_load(source.read_text())
    for key in ("run", "traces", "reference", "scenario"):
        if key in raw:
            raw[key] = str((source.parent / raw[key]).resolve())
    spec = tmp_path / source.name
    spec.write_text(yaml.safe_dump({**raw, **changes}, sort_keys=False))
    return spec


def _record(parameter: str, value: float, side: str, fit: str) -> dict[str, Any]:
    return {"parameter": parameter, "value": value, "side": side, "bound": value, "fit": fit}


@pytest.mark.timeout(120)
def test_parameters_the_emulator_run_drives_to_a_bound_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The emulator loop's fit ends with no under-use (``rows_half_util`` 0.002 rows, its
    lower bound 0) and no duplex cost (share 1, its upper bound): calibrate said nothing."""
    out = tmp_path / "profile.yaml"
    assert (
        main(["calibrate", str(_spec(EMU_MACHINE / "spec.yaml", tmp_path)), "--out", str(out)]) == 0
    )
    warned = [line for line in capsys.readouterr().err.splitlines() if "bound" in line]
    assert warned == [
        "edgetwin: warning: compute.rows_half_util = 0.002054 is at its lower bound (0) in the "
        "timing fit: the bound stopped it, not the data. The data does not pin it, or the "
        "twin's model lacks a cause the data shows (fit.at_bound; a value you know goes in "
        "the spec's fixed)",
        "edgetwin: warning: network.duplex_efficiency = 1 is at its upper bound (1) in the "
        "timing fit: the bound stopped it, not the data. The data does not pin it, or the "
        "twin's model lacks a cause the data shows (fit.at_bound; a value you know goes in "
        "the spec's fixed)",
    ]
    assert yaml.safe_load(out.read_text())["fit"]["at_bound"] == [
        {**_record("compute.rows_half_util", 0.0, "lower", "timing"), "value": 0.002054},
        _record("network.duplex_efficiency", 1.0, "upper", "timing"),
    ]


@pytest.mark.timeout(120)
def test_with_those_parameters_fixed_none_is_at_a_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixed = {"compute.rows_half_util": 0.0, "network.duplex_efficiency": 1.0}
    spec = _spec(EMU_MACHINE / "spec.yaml", tmp_path, fixed=fixed)
    out = tmp_path / "profile.yaml"
    assert main(["calibrate", str(spec), "--out", str(out)]) == 0
    assert "bound" not in capsys.readouterr().err
    assert "at_bound" not in yaml.safe_load(out.read_text())["fit"]


@pytest.mark.timeout(300)
def test_a_trace_fit_names_its_parameter_at_a_bound_and_one_without_none(
    tmp_path: Path,
) -> None:
    """h200_netns's staging fit puts the extra cost of a copy above 128 KiB at 0 ms, its
    lower bound; h200_loopback's fits stop inside every bound. (No resamples: the
    bootstrap is not what is checked.)"""
    netns = _spec(SPECS / "h200_netns.yaml", tmp_path, bootstrap=0)
    with pytest.warns(AtBoundWarning, match=r"staging\.large_copy_ms = 0 is at its lower bound"):
        profile = edgetwin.calibrate(netns)
    assert isinstance(profile, DeviceProfile)
    assert at_bound(profile) == [_record("staging.large_copy_ms", 0.0, "lower", "staging")]
    (tmp_path / "loopback").mkdir()
    loopback = _spec(SPECS / "h200_loopback.yaml", tmp_path / "loopback", bootstrap=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AtBoundWarning)
        profile = edgetwin.calibrate(loopback)
    assert isinstance(profile, DeviceProfile) and at_bound(profile) == []


@pytest.mark.timeout(120)
def test_a_table_fit_names_a_power_state_it_leaves_at_0_watts(
    jetson_table_calibration: PipedRun,
) -> None:
    """The Jetson table's energies put the idle and staging powers at 0 W (non-negative
    least squares' bound) although its rows spend time in both. The calibrate is the
    session's of the Jetson table spec (its stderr and the profile it wrote)."""
    out = jetson_table_calibration.folder / "loud.yaml"
    warned = [line for line in jetson_table_calibration.stderr.splitlines() if "bound" in line]
    assert [line.split(" = ")[0] for line in warned] == [
        "edgetwin: warning: power.idle_w",
        "edgetwin: warning: power.staging_w",
    ]
    assert all("at its lower bound (0) in the power fit" in line for line in warned)
    assert yaml.safe_load(out.read_text())["fit"]["at_bound"] == [
        _record("power.idle_w", 0.0, "lower", "power"),
        _record("power.staging_w", 0.0, "lower", "power"),
    ]


def test_records_added_at_a_bound_follow_the_ones_a_profile_has() -> None:
    """``with_at_bound`` keeps a profile's own records first and adds the new ones after;
    with none at all, ``fit`` gets no ``at_bound`` key."""
    jetson = load_profile("jetson_orin_nano")
    record = bound_record("network.duplex_efficiency", 1.0, ("upper", 1.0), "timing")
    assert at_bound(with_at_bound(jetson, [record])) == [*at_bound(jetson), record]
    assert at_bound(jetson) == at_bound(with_at_bound(jetson, []))
    bare = jetson.model_copy(update={"fit": {}})
    assert with_at_bound(bare, []).fit == {}
    assert with_at_bound(bare, [record]).fit == {"at_bound": [record]}


def test_a_bootstrap_records_the_share_of_its_resamples_at_each_bound() -> None:
    """Only the point fit was checked: a parameter that a bound stopped in some bootstrap
    resamples has its spread (and the intervals drawn from its samples) cut at the bound,
    and nothing said so. Each section records, per parameter, the share of its resamples
    at each bound (``fit.sections.<section>.resamples_at_bound``)."""
    # each group times a + 1 ms, a in [0, 10]: a resample whose mean is under 1 ms puts a at 0
    groups = {("copy", size): [0.7, 1.0, 1.4] for size in (1, 2)}
    fit = fit_groups(
        "copy",
        groups,
        lambda params, _key: params["a"] + 1.0,
        lambda key: ("latency_ms", str(key)),
        {"a": (0.0, 10.0, 1.0)},
        {},
        40,
        np.random.default_rng(0),
    )
    at_zero = sum(sample["a"] <= 1e-5 for sample in fit.samples) / 40
    assert fit.at_bound == {} and 0 < at_zero < 1
    assert fit.summary()["resamples_at_bound"] == {"a": {"lower": at_zero}}
    sections = load_profile("h200_netns").fit["sections"]  # its point fit's at_bound, in all
    assert sections["staging"]["resamples_at_bound"] == {"large_copy_ms": {"lower": 1.0}}
    loopback = load_profile("h200_loopback").fit["sections"].values()
    assert not any("resamples_at_bound" in section for section in loopback)

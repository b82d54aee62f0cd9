"""A fitted profile that misses its own measurements is named with a warning: a trace
whose timings disagree (as a busy machine's do) still gives a profile, and says so."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest

import edgetwin
from edgetwin.calibration.fit_check import (
    POOR_FIT_PCT,
    TRACES_CAUSE,
    PoorFitWarning,
    busy_machine_cause,
    median_errors,
    poor_fit_warning,
    poorly_fitted,
)
from edgetwin.cli import main
from edgetwin.number_text import figure_text
from edgetwin.profile import load_profile
from tests.conftest import REPO

LOOPBACK = REPO / "data/traces/h200-loopback-2026-11"
H200 = REPO / "edgetwin/calibration/profiles/h200_loopback.yaml"
WARNING = "edgetwin: warning: the fitted profile misses its own measurements"


def _compute_spec(tmp_path: Path, slowed_batches: set[str]) -> Path:
    """A compute-only spec over the H200's ViT latencies, those of ``slowed_batches`` 20x
    slower (threads held back by other work), the rest of the profile from the H200's."""
    traces = tmp_path / "traces"
    traces.mkdir()
    with (LOOPBACK / "vit_latency.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    with (traces / "vit_latency.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            if row["batch"] in slowed_batches:
                row["latency_ms"] = str(float(row["latency_ms"]) * 20)
            writer.writerow(row)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "kind: traces\nprofile: {name: uneven, ram_mb: 8000}\ntraces: traces\n"
        f"model: {{preset: vit_b16}}\nfit: [compute]\nbase: {H200}\nbootstrap: 0\n"
    )
    return spec


@pytest.mark.parametrize(("slowed", "warned"), [(set(), False), ({"1", "8"}, True)])
def test_calibrate_warns_when_the_fit_misses_its_own_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], slowed: set[str], warned: bool
) -> None:
    spec = _compute_spec(tmp_path, slowed)
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]) == 0
    err = capsys.readouterr().err
    profile = load_profile(str(tmp_path / "profile.yaml"))  # written either way
    compute_pct = profile.fit["median_abs_error_pct"]["compute"]
    assert (compute_pct > POOR_FIT_PCT) is warned
    assert err.count(WARNING) == int(warned)  # once: the API's warning is not said again
    if warned:
        assert f"compute {figure_text(compute_pct)} %" in err and "quiet machine" in err


@pytest.mark.parametrize(("slowed", "warned"), [(set(), False), ({"1", "8"}, True)])
def test_the_api_warns_as_the_command_does(tmp_path: Path, slowed: set[str], warned: bool) -> None:
    spec = _compute_spec(tmp_path, slowed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile = edgetwin.calibrate(spec)
    poor = [w for w in caught if issubclass(w.category, PoorFitWarning)]
    assert len(poor) == int(warned)
    if warned:
        assert str(poor[0].message) == poor_fit_warning(profile, TRACES_CAUSE)
        assert poor[0].filename == __file__  # it points at the caller's line


@pytest.mark.parametrize("name", ["h200_loopback", "h200_netns", "jetson_orin_nano"])
def test_every_shipped_fit_describes_its_own_data(name: str) -> None:
    shipped = load_profile(name)
    assert max(shipped.fit["median_abs_error_pct"].values()) < 10  # docs/calibration.md
    assert poorly_fitted(shipped) == {} and poor_fit_warning(shipped, "why") is None


def test_the_fit_line_says_each_error_as_the_profile_keeps_it() -> None:
    """The line rounded the kept two decimals again: the Jetson's staging 0.25 % read 0.2 %
    and its comm 3.95 % read 4.0 %."""
    shipped = load_profile("jetson_orin_nano")
    kept = shipped.fit["median_abs_error_pct"]
    said = median_errors(shipped)
    assert (kept["staging_ms"], kept["comm_ms"]) == (0.25, 3.95)
    assert "staging_ms 0.25 %" in said and "comm_ms 3.95 %" in said


def test_the_warning_names_only_the_poor_sections_and_the_machine_load() -> None:
    shipped = load_profile(str(H200))
    fit = shipped.fit | {"median_abs_error_pct": {"compute": 66.44, "staging": 1.7}}
    uneven = shipped.model_copy(update={"fit": fit})
    assert poorly_fitted(uneven) == {"compute": 66.44}
    warning = poor_fit_warning(uneven, busy_machine_cause(2.37, 2))
    assert warning is not None
    assert "compute 66.44 %" in warning and "staging" not in warning
    assert "load average 2.4 on 2 cores" in warning

"""A parameter that no measured row changes with is not fitted: the fit leaves it where it
started, and the profile and the command say so. A CPU board (no GPU) whose every block
outlasts its host time fitted ``compute.sync_host_ms`` and ``sync_host_ms_per_mb`` to
their start, 5 ms and 5 ms/MB, as if measured, without a word."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest
import yaml

import edgetwin
from edgetwin.calibration.fit_check import not_pinned_record, not_pinned_warnings, with_not_pinned
from edgetwin.cli import main
from edgetwin.profile import load_profile
from tests.conftest import REPO

BOARD = {  # a CPU board: its blocks take far longer than its host's part of them
    "name": "cpu_board",
    "ram_mb": 8192,
    "compute": {
        "throughput_gflops": 60,
        "launch_floor_ms": 2,
        "sync_host_ms": 1,
        "sync_host_ms_per_mb": 0.5,
    },
    "staging": {"fixed_ms": 0, "ms_per_mb": 0},
    "network": {"message_overhead_ms": 0.5},
    "power": {"idle_w": 2.7, "compute_w": 7, "host_w": 4, "staging_w": 4, "comm_w": 4},
}
COLUMNS = ["strategy", "devices", "batch", "bandwidth_mbps", "segments"]
METRICS = ["compute_ms", "staging_ms", "comm_ms", "total_ms", "energy_j"]
NO_STAGING = ["staging.fixed_ms", "staging.ms_per_mb", "staging.d2h_wait_ms_per_mb"]


def _spec(tmp_path: Path) -> Path:
    """A table spec of the board's own rows (two-block ViT-B/16, two boards), measured by
    the twin with the board's profile: single at batch 1, 2, 4 and Prism at batch 1, 2 on
    two links."""
    scenario = yaml.safe_load((REPO / "scenarios/prism_jetson.yaml").read_text())
    del scenario["reference"]
    scenario["model"]["blocks"] = 2
    scenario["devices"] = [{"name": "board", "profile": BOARD, "count": 2}]
    scenario["strategies"] = [{"name": "single"}, {"name": "prism", "cr": [9.9]}]
    scenario["sweeps"] = [{"batch": [1, 2, 4], "bandwidth_mbps": [300]}]
    (tmp_path / "pair.yaml").write_text(yaml.safe_dump(scenario))
    measured = edgetwin.run(
        tmp_path / "pair.yaml",
        overrides=["sweeps=[{batch: [1, 2], bandwidth_mbps: [300, 600]}, {batch: [4]}]"],
    )
    rows = [r for r in measured.rows if r.strategy == "single" or r.batch < 4]
    rows = [r for r in rows if r.strategy == "prism" or r.bandwidth_mbps == 300]
    with (tmp_path / "measured.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS + METRICS)
        for r in rows:
            writer.writerow(
                [getattr(r, c) if getattr(r, c) is not None else "" for c in COLUMNS + METRICS]
            )
    spec = {
        "profile": {"name": "cpu_board_fit", "ram_mb": 8192},
        "reference": "measured.csv",
        "scenario": "pair.yaml",
        "fixed": {**dict.fromkeys(NO_STAGING, 0.0), "staging.large_copy_ms": 0.0},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "spec.yaml"


@pytest.mark.timeout(300)
def test_a_parameter_no_row_changes_with_is_named_not_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile = edgetwin.calibrate(spec)
    named = {r["parameter"]: r for r in profile.fit["not_pinned"]}
    assert set(named) == {"compute.sync_host_ms", "compute.sync_host_ms_per_mb"}
    assert named["compute.sync_host_ms"] == {
        "parameter": "compute.sync_host_ms",
        "value": profile.compute.sync_host_ms,
        "fit": "timing",
    }
    lines = [str(w.message) for w in caught if w.category is edgetwin.NotPinnedWarning]
    assert len(lines) == 2 and issubclass(edgetwin.NotPinnedWarning, edgetwin.FIT_WARNINGS)
    assert lines[0].startswith("compute.sync_host_ms = 5 is where the timing fit started")
    assert "fit.not_pinned" in lines[0]
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "fit.yaml"), "--quiet"]) == 0
    stderr = capsys.readouterr().err
    assert "edgetwin: warning: compute.sync_host_ms_per_mb = 5 is where the timing fit" in stderr
    written = yaml.safe_load((tmp_path / "fit.yaml").read_text())
    assert [r["parameter"] for r in written["fit"]["not_pinned"]] == list(named)


def test_the_kept_start_is_said_with_every_digit_and_no_exponent() -> None:
    """``g`` said a start of 1,234,567 GFLOP/s ``1.23457e+06`` (six digits, an exponent) and
    one of 0.00002 ms/MB ``2e-05``: the line says the value the profile keeps, as given.
    (The fits' own starts, 500 and 5 or less, read the same either way.)"""
    profile = with_not_pinned(
        load_profile("jetson_orin_nano"),
        [
            not_pinned_record("compute.throughput_gflops", 1_234_567.0, "timing"),
            not_pinned_record("compute.sync_host_ms_per_mb", 0.00002, "timing"),
        ],
    )
    lines = not_pinned_warnings(profile)
    assert [line.split(" is where ")[0] for line in lines] == [
        "compute.throughput_gflops = 1,234,567",
        "compute.sync_host_ms_per_mb = 0.00002",
    ]
    assert lines[0].endswith(
        "the timing fit started: no measured row changes with it, so the"
        " data does not pin it (a host time a slower GPU always outlasts,"
        " say) and the profile keeps the start (fit.not_pinned; a value you"
        " know goes in the spec's fixed)"
    )

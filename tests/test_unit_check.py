"""A trace column whose times no device the fit takes reaches (microseconds in a column
read in ms: values 1000x too large) is named with a warning: its file and its column."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest

import edgetwin
from edgetwin.calibration.trace_inputs import TraceData
from edgetwin.calibration.unit_check import slow_columns
from edgetwin.cli import main
from edgetwin.model_spec import ModelSpec
from edgetwin.profile import load_profile
from tests.conftest import REPO

LOOPBACK = REPO / "data/traces/h200-loopback-2026-11"
H200 = REPO / "edgetwin/calibration/profiles/h200_loopback.yaml"
JETSON_SLOWER = 60  # a Jetson Orin Nano's ViT-B/16 forward against the H200's (~570 ms at 8)


def _scaled(name: str, folder: Path, columns: dict[str, float]) -> Path:
    """The H200 loopback trace ``name`` in ``folder``, each of ``columns`` times its factor."""
    with (LOOPBACK / name).open() as handle:
        rows = list(csv.DictReader(handle))
    folder.mkdir(exist_ok=True)
    with (folder / name).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(row | {c: f"{float(row[c]) * k:.6g}" for c, k in columns.items()})
    return folder / name


@pytest.mark.timeout(300)
@pytest.mark.parametrize("unit_ms", [1.0, 0.001], ids=["ms", "us"])
def test_a_jetsons_latencies_in_microseconds_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unit_ms: float
) -> None:
    """A Jetson's ViT latencies written in microseconds under latency_ms were read as a
    device 1000x slower, and the fit followed them without a word about the unit (at most
    its parameters at their bounds). The values alone are slower than the slowest device a
    fit takes (10 GFLOP/s, 20 ms a kernel group): a warning names the file and the column
    first, and the profile keeps it; the same trace in ms says nothing of the kind."""
    trace = _scaled("vit_latency.csv", tmp_path / "traces", {"latency_ms": JETSON_SLOWER / unit_ms})
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "kind: traces\nprofile: {name: my_jetson, ram_mb: 8192}\ntraces: traces\n"
        f"model: {{preset: vit_b16}}\nfit: [compute]\nbase: {H200}\nbootstrap: 0\n"
    )
    out = tmp_path / "profile.yaml"
    assert main(["calibrate", str(spec), "--out", str(out), "--quiet"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "microseconds" in line]
    kept = load_profile(str(out)).fit.get("slow_columns", [])
    if unit_ms == 1.0:
        assert said == [] and kept == []
        return
    assert len(said) == 1 and said[0] == f"edgetwin: warning: {kept[0]}"
    assert kept[0].startswith(f"{trace}: field 'latency_ms': even the fastest group (")
    assert "10 GFLOP/s and 20 ms a kernel group" in kept[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        edgetwin.calibrate(spec)
    assert caught[0].category is edgetwin.UnitWarning and str(caught[0].message) == kept[0]


@pytest.mark.parametrize("unit_ms", [1.0, 0.001], ids=["ms", "us"])
def test_copies_in_microseconds_are_named_by_their_column(tmp_path: Path, unit_ms: float) -> None:
    """A board's GPU->host copies (3x the H200's pageable ones) in microseconds: the d2h_ms
    column of the staged exchange is named; the rest of the file (comm_ms, a link's rate,
    which any value may be) is not checked."""
    times = {column: 3 / unit_ms for column in ("d2h_ms", "h2d_ms", "comm_ms", "total_ms")}
    trace = _scaled("gloo_staged_allgather.csv", tmp_path, times)
    named = slow_columns(TraceData(tmp_path), ModelSpec())
    if unit_ms == 1.0:
        assert named == []
        return
    assert len(named) == 1 and named[0].startswith(f"{trace}: field 'd2h_ms': even the fastest")
    assert "20 ms + 100 ms/MB a copy" in named[0] and ", a block: " in named[0]

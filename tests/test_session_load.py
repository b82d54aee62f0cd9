"""The warm session load model: measured with the real worker's code, fitted, and followed
by the twin's phones (docs/crowd.md, "Session loads follow the stage")."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgetwin.calibration.session_load import (
    fit_session_load,
    read_session_loads,
    stage_loads,
)
from edgetwin.calibration.session_load_measure import measure_session_loads, write_session_loads
from edgetwin.emu.crowdio.model import TINY
from edgetwin.errors import InputError
from edgetwin.phone_profile import load_phone_profile
from edgetwin.scenario import load_scenario
from edgetwin.sim.crowd.costs import warm_load_ms
from tests.conftest import REPO

SHIPPED = REPO / "data/traces/onnx-session-load-2026-12/session_load.csv"


def test_the_shipped_loads_grow_with_the_stage_and_the_fit_follows_them() -> None:
    samples = read_session_loads(SHIPPED)
    stages = stage_loads(samples)
    assert {s.cut for s in stages} == {3, 6} and all(s.runs >= 5 for s in stages)
    by_size = sorted(stages, key=lambda s: s.size_mb)
    assert by_size[0].mean_ms * 10 < by_size[-1].mean_ms  # 2.4 MB head vs 179 MB cell_a
    fit = fit_session_load(samples)
    assert fit.ms_per_mb > 0 and fit.ms_per_mapped_mb > 0 and fit.ms_per_node == 0
    assert fit.median_abs_error_pct < 10
    for s in stages:  # every stage within 10 % of its measured median
        assert abs(fit.predict_ms(s.size_mb) / s.median_ms - 1) < 0.1, s
    with_nodes = fit_session_load(samples, per_node=True)
    assert with_nodes.median_abs_error_pct >= fit.median_abs_error_pct - 1e-9


@pytest.mark.timeout(120)
def test_a_real_measurement_of_the_tiny_model_reads_back(tmp_path: Path) -> None:
    """The worker's own cache and session slot on the tiny DistilBERT's three stages."""
    samples = measure_session_loads(cuts=(3,), repeats=2, config=TINY)
    assert [(s.stage, s.rep) for s in samples] == [
        (stage, rep) for rep in range(2) for stage in ("cell_a", "cell_b", "cell_c")
    ]
    sizes = {s.stage: s.size_mb for s in samples}
    assert sizes["cell_a"] > sizes["cell_b"] > sizes["cell_c"] > 0
    assert all(s.nodes > 0 and s.load_ms >= s.session_ms > 0 for s in samples)
    path = tmp_path / "loads.csv"
    write_session_loads(samples, path)
    assert read_session_loads(path) == samples


def test_a_bad_measurement_file_names_the_column_and_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "loads.csv"
    lines = SHIPPED.read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace("179.128", "big")]) + "\n")
    with pytest.raises(InputError) as caught:
        read_session_loads(bad)
    assert caught.value.field == "size_mb"
    assert caught.value.problem.startswith("line 2:")
    with pytest.raises(InputError, match="file not found"):
        read_session_loads(tmp_path / "missing.csv")


def test_twin_load_times_follow_the_stage_size_on_every_phone_class() -> None:
    scenario = load_scenario(REPO / "scenarios/crowdio_android.yaml")
    assert scenario.crowd is not None
    stages = scenario.crowd.job.stages  # cell_a 180 MB, cell_b 85 MB, cell_c 2.4 MB
    classes = [load_phone_profile(f"android_{c}") for c in ("low", "mid", "high")]
    for phone in classes:
        loads = [warm_load_ms(phone, s) for s in stages]
        assert loads == sorted(loads, reverse=True) and loads[0] > 50 * loads[2]
    cell_a = [warm_load_ms(phone, stages[0]) for phone in classes]
    assert cell_a == sorted(cell_a, reverse=True)  # slowest class first

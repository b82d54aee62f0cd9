"""The loop for real (root, Mininet): the twin calibrated from an emulator sweep predicts
another sweep of the emulator (other batch, other bandwidth).

How well it predicts is a wall-clock figure of a shared machine: it is measured by
``benchmarks/bench_emu_loop.py`` and recorded with its spread in docs/emulator.md. The
tests check the mechanism: what the fit reads, and that every held-out point is
predicted from the fitted profile."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from edgetwin.calibration.emu_loop import LoopResult, LoopSettings, close_loop
from edgetwin.table_files import read_table
from tests.emu_checks import needs_emulator

pytestmark = needs_emulator

# ViT-B/16's sequence at half its width, 2 blocks: ~0.75 GFLOP per sample and block;
# Voltage moves ~0.3 MB per rank and block at batch 1. Fit on batch 1, 4 x 200, 800 Mbps;
# check on batch 2 at 400 Mbps.
MODEL = {"tokens": 197, "width": 384, "heads": 6, "blocks": 2}
SWEEP = {
    "name": "loop",
    "repetitions": 2,
    "model": MODEL,
    "real_warmups": 1,
    "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
    "strategies": [{"name": "single"}, {"name": "voltage"}, {"name": "prism", "cr": 9.9}],
}
FIT = [{"batch": [1, 4], "bandwidth_mbps": [200, 800], "devices": [2]}]
CHECK = [{"batch": [2], "bandwidth_mbps": [400], "devices": [2]}]


def _scenario(path: Path, sweeps: list[dict[str, list[int]]]) -> Path:
    path.write_text(yaml.safe_dump({**SWEEP, "name": path.stem, "sweeps": sweeps}))
    return path


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[LoopResult, Path]:
    folder = tmp_path_factory.mktemp("loop")
    fit, check = _scenario(folder / "fit.yaml", FIT), _scenario(folder / "check.yaml", CHECK)
    result = close_loop(fit, check, folder / "out", LoopSettings(link_check_s=1))
    return result, folder / "out"


def test_the_twin_predicts_every_held_out_point(loop: tuple[LoopResult, Path]) -> None:
    result, out = loop
    assert len(result.check.points) == 3 * 4  # configurations x metrics (the median rep)
    assert not result.check.unmatched_keys
    check_rows = read_table(out / "emu_check" / "results.csv")
    assert {int(row["batch"]) for row in check_rows} == {2}  # none of the fit's batches
    for point in result.check.points:
        assert point["predicted"] >= 0 and point["measured"] >= 0, point
        if point["metric"] == "total_ms":
            assert point["predicted"] > 0 and point["error_pct"] is not None, point


def test_profile_fitted_from_the_fit_sweeps_emulator_rows_only(
    loop: tuple[LoopResult, Path],
) -> None:
    result, out = loop
    fit = result.profile.fit
    fit_run = out / "emu_fit"
    assert {s["file"]: s["sha256"] for s in fit["sources"]} == {
        name: hashlib.sha256((fit_run / name).read_bytes()).hexdigest()
        for name in ("results.csv", "link_check.csv", "scenario.resolved.yaml")
    }
    rows = read_table(fit_run / "results.csv")
    assert {row["mode"] for row in rows} == {"emu"} and fit["rows"]["count"] == len(rows) == 24
    assert {int(row["batch"]) for row in rows} == {1, 4}
    spec = yaml.safe_load((out / "machine" / "spec.yaml").read_text())
    assert spec["kind"] == "emu" and (out / "machine" / spec["run"]).resolve() == fit_run.resolve()

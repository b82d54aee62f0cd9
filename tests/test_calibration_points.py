"""A fit needs as many distinct measured points as it has free parameters (and two): with
fewer it was accepted and written, matching its data whatever the model and reporting a
median |error| of 0.0 %. Each kind of fit refuses it, exit 2 naming the file the points
are in; a held-out refit left with too few is skipped, with a notice."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin.calibration.trace_holdout import leave_one_out
from edgetwin.cli import main
from tests.conftest import REPO

LOOPBACK = REPO / "data/traces/h200-loopback-2026-11"
LOOPBACK_PROFILE = REPO / "edgetwin/calibration/profiles/h200_loopback.yaml"
JETSON_SPEC = REPO / "edgetwin/calibration/specs/jetson_orin_nano.yaml"
JETSON_TABLE = REPO / "data/reference/prism-jetson/measurements.csv"
EMU_RUN = REPO / "data/traces/emu-vit-loop-2026-12/fit"


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *expect: str) -> None:
    """``main(argv)`` exits 2 with one error line holding ``expect``, writing nothing."""
    out = Path(argv[argv.index("--out") + 1])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("edgetwin: error: "), err
    assert "Traceback" not in err
    for fragment in expect:
        assert fragment in err, (fragment, err)
    assert not out.exists()


def _trace_spec(tmp_path: Path, files: dict[str, list[str]], **spec: Any) -> Path:
    """A ``traces`` spec on the loopback profile, its folder holding ``files`` (a trace
    file's name: its lines, the header first)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for name, lines in files.items():
        (traces / name).write_text("\n".join(lines) + "\n")
    raw = {
        "kind": "traces",
        "profile": {"name": "t", "ram_mb": 1000},
        "traces": str(traces),
        "base": str(LOOPBACK_PROFILE),
        "bootstrap": 0,
        **spec,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.parametrize("copies", [1, 20])
def test_a_compute_fit_from_one_point_is_refused(
    copies: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One row of vit_latency.csv, or 20 repetitions of it: one point for throughput,
    launch floor and rows_half_util."""
    header, first = _lines(LOOPBACK / "vit_latency.csv")[:2]
    kernel, batch, tokens, _rep, latency = first.split(",")
    reps = [f"{kernel},{batch},{tokens},{rep},{latency}" for rep in range(copies)]
    spec = _trace_spec(tmp_path, {"vit_latency.csv": [header, *reps]}, fit=["compute"])
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expected = ("vit_latency.csv: 1 distinct point", "compute fit's 3 free parameters")
    _refused(argv, capsys, *expected, "rows_half_util", "measure more batch sizes")


def test_an_exchange_fit_from_one_row_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, first = _lines(LOOPBACK / "gloo_staged_allgather.csv")[:2]
    files = {"gloo_staged_allgather.csv": [header, first]}
    spec = _trace_spec(tmp_path, files, fit=["staging", "network"])
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expected = ("gloo_staged_allgather.csv: 1 distinct point", "staging fit's 5 free parameters")
    _refused(argv, capsys, *expected)


def test_a_decoder_fit_from_one_generation_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One generation's TTFT and TPOT: through one point a bandwidth passes."""
    from tests.test_decoder_calibration import JETSON, MODEL

    files = {
        "decoder_latency.csv": [
            "layers,batch,prompt_tokens,output_tokens,rep,ttft_ms,tpot_ms",
            "1,1,8,4,0,5.58,5.57",
        ]
    }
    spec = _trace_spec(tmp_path, files, base=str(JETSON), decoder=MODEL, fit=["memory"])
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expected = ("decoder_latency.csv: 1 distinct point", "memory fit's 1 free parameter ")
    _refused(argv, capsys, *expected, "at least 2")


def test_a_table_of_one_batch_size_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Jetson table cut to its batch-1 rows: one one-board row for the GPU's
    throughput and launch floor."""
    lines = _lines(JETSON_TABLE)
    table = tmp_path / "batch1.csv"
    table.write_text("\n".join([lines[0], *(x for x in lines[1:] if ",1,400," in x)]) + "\n")
    spec = yaml.safe_load(JETSON_SPEC.read_text())
    spec.update(reference=str(table), scenario=str(REPO / "scenarios/prism_jetson.yaml"))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    argv = ["calibrate", str(path), "--out", str(tmp_path / "p.yaml")]
    expected = ("batch1.csv: field 'compute_ms': 1 distinct point", "2 free parameters")
    _refused(argv, capsys, *expected, "throughput_gflops, launch_floor_ms")


def test_an_emulator_run_of_one_row_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(EMU_RUN, run)
    (run / "results.csv").write_text("\n".join(_lines(run / "results.csv")[:2]) + "\n")
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "m")]
    expected = ("results.csv: field 'compute_ms': 1 distinct point", "3 free parameters")
    _refused(argv, capsys, *expected)


def test_a_held_out_refit_with_too_few_points_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """Whole-model latencies at batch 1, 2 and 8 fit the three compute parameters; without
    batch 1 two points are left, and its held-out 'prediction' was any law through them."""
    header, *rows = _lines(LOOPBACK / "vit_latency.csv")
    kept = [row for row in rows if row.startswith(("vit_full,1,", "vit_full,2,", "vit_full,8,"))]
    spec = _trace_spec(tmp_path, {"vit_latency.csv": [header, *kept]}, fit=["compute"])
    refits = leave_one_out(spec, "batch")
    assert refits.points == []
    assert refits.warnings == [
        f"validation: batch {batch} gives no held-out compute points: without it,"
        " vit_latency.csv holds too few distinct points to refit compute from"
        for batch in (1, 2, 8)
    ]

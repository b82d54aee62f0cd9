"""Scoring the selection policies against measured ground truth (a table of real runs)."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from statistics import median

import pytest

from edgetwin.calibration.fit_emu import calibrate_from_emu
from edgetwin.cli import main as cli_main
from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive import evaluate
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.adaptive_results import Evaluation, skipped_line
from edgetwin.evaluate.adaptive_scores import regret_pct
from edgetwin.evaluate.measured import SkippedCell
from edgetwin.profile import load_profile
from edgetwin.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
JETSON_EVAL = REPO / "scenarios" / "adaptive_jetson_measured.eval.yaml"
TWIN_EVAL = REPO / "scenarios" / "adaptive_prism.eval.yaml"
JETSON_ROWS = REPO / "data" / "reference" / "prism-jetson" / "measurements.csv"
LABELS = {"single": "single", "voltage": "voltage x2", "prism": "prism cr 9.9 x2"}

pytestmark = pytest.mark.timeout(120)


def _run(path: Path, overrides: tuple[str, ...] = ()) -> Evaluation:
    inputs = load_eval_inputs(path, overrides)
    return evaluate(
        inputs.scenario,
        inputs.scenario_path,
        inputs.settings,
        inputs.map_table,
        truth_rows=inputs.truth_rows,
        truth_table=inputs.truth_table,
    )


def _published() -> dict[int, dict[str, float]]:
    """batch -> candidate label -> published total_ms, read from the table itself."""
    table: dict[int, dict[str, float]] = {}
    with JETSON_ROWS.open(newline="") as handle:
        for row in csv.DictReader(handle):
            table.setdefault(int(row["batch"]), {})[LABELS[row["strategy"]]] = float(
                row["total_ms"]
            )
    return table


@pytest.fixture(scope="module")
def jetson() -> Evaluation:
    return _run(JETSON_EVAL)


def test_the_oracle_and_regrets_are_the_published_figures(jetson: Evaluation) -> None:
    published = _published()
    complete = {b for b, here in published.items() if len(here) == len(LABELS)}
    assert {c.batch for c in jetson.conditions} == complete
    for condition in jetson.conditions:
        here = published[condition.batch]
        assert {k: v.latency_ms for k, v in condition.truth.items()} == here
        assert condition.oracle == min(here, key=here.__getitem__)
        for name, choice in condition.choices.items():
            expected = regret_pct(here[choice.label], here[condition.oracle])
            assert choice.regret_pct == pytest.approx(expected), name
    assert jetson.truth_source == "table measurements.csv"


def test_a_batch_not_measured_for_every_candidate_is_skipped(jetson: Evaluation) -> None:
    partial = {b for b, here in _published().items() if len(here) < len(LABELS)}
    assert partial  # the published table has one (batch 4: single only)
    assert {cell.batch for cell in jetson.skipped} == partial
    assert set(jetson.skipped[0].missing) == {LABELS["voltage"], LABELS["prism"]}
    skipped = jetson.to_json()["truth"]["skipped"]
    assert [cell["batch"] for cell in skipped] == sorted(partial)


def test_policies_pick_only_measured_candidates(jetson: Evaluation) -> None:
    """The map (adaptive_prism: CR 9.9, 4.95, 3.3) is cut to what the boards measured."""
    assert {c.label for c in jetson.perf_map.candidates} == set(LABELS.values())


def test_repetitions_count_with_their_median(tmp_path: Path) -> None:
    """Three repetitions of single, one disturbed: the truth is their median."""
    rows = [
        "strategy,devices,batch,bandwidth_mbps,cr,segments,rep,total_ms,status",
        "single,1,8,400,,,0,100,ok",
        "single,1,8,400,,,1,900,ok",
        "single,1,8,400,,,2,110,ok",
        "voltage,2,8,400,,,0,300,ok",
        "prism,2,8,400,9.9,10,0,105,ok",
        "prism,2,8,400,9.9,10,1,,failed",
    ]
    table = tmp_path / "measured.csv"
    table.write_text("\n".join(rows) + "\n")
    result = _run(JETSON_EVAL, (f"truth_table={table}",))
    (condition,) = result.conditions
    assert condition.truth["single"].latency_ms == 110
    assert condition.truth["prism cr 9.9 x2"].latency_ms == 105
    assert condition.oracle == "prism cr 9.9 x2"


def test_bad_ground_truth(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a second ground truth") as exc:
        load_eval_inputs(JETSON_EVAL, ("held_out={batch: [1]}",))
    assert exc.value.field == "truth_table"  # the error named no field
    with pytest.raises(InputError, match="no ground truth") as exc:
        load_eval_inputs(JETSON_EVAL, ("truth_table=null",))
    assert exc.value.field == "held_out"
    table = tmp_path / "no_single.csv"
    table.write_text("strategy,devices,batch,bandwidth_mbps,total_ms\nvoltage,2,1,400,300\n")
    with pytest.raises(InputError, match="no measured row of single"):
        _run(JETSON_EVAL, (f"truth_table={table}",))
    table.write_text("name,value\nx,1\n")
    with pytest.raises(InputError, match="not a results table") as exc:
        load_eval_inputs(JETSON_EVAL, (f"truth_table={table}",))
    assert (exc.value.path, exc.value.field) == (str(JETSON_EVAL), "truth_table")
    rows = JETSON_ROWS.read_text().splitlines()  # a regret over an oracle of 0 ms
    fields = rows[1].split(",")
    fields[rows[0].split(",").index("total_ms")] = "0"
    table.write_text("\n".join([rows[0], ",".join(fields), *rows[2:]]) + "\n")
    for field in ("truth_table", "map_table"):
        with pytest.raises(InputError, match="total_ms 0: a run that finished") as exc:
            _run(JETSON_EVAL, (f"{field}={table}",))
        assert (exc.value.path, exc.value.field) == (str(JETSON_EVAL), field)


@pytest.mark.parametrize("field", ["truth_table", "map_table"])
def test_a_table_without_its_latency_column_is_refused(field: str, tmp_path: Path) -> None:
    """A table with the latency in another unit (``total_s``) and no ``total_ms`` read every
    cell as a failed run: as a map, every candidate was infeasible everywhere and the
    policies were scored on it (exit 0); as the truth, 'every candidate fails'. The column
    is named with the unit read."""
    rows = JETSON_ROWS.read_text().splitlines()
    table = tmp_path / "in_seconds.csv"
    table.write_text("\n".join([rows[0].replace("total_ms", "total_s"), *rows[1:]]) + "\n")
    evaluation = JETSON_EVAL if field == "truth_table" else TWIN_EVAL
    expect = r"in_seconds\.csv: column 'total_s' is in s, where total_ms is read in ms"
    with pytest.raises(InputError, match=expect) as exc:
        load_eval_inputs(evaluation, (f"{field}={table}",))
    assert exc.value.field == field


def test_a_map_without_flops_warns_that_the_flop_heuristic_picks_single(
    tmp_path: Path,
) -> None:
    """A map table without gflops_per_device (measured rows carry none) left the FLOP
    heuristic nothing to weigh: it picked single at every condition, scored without a word."""
    import edgetwin

    twin = edgetwin.run(REPO / "scenarios" / "adaptive_prism.yaml", out=tmp_path / "twin")
    with (tmp_path / "twin" / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    table = tmp_path / "no_flops.csv"
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "gflops_per_device": ""} for row in rows)
    from_table = _run(TWIN_EVAL, (f"map_table={table}",))
    assert any("flop_heuristic weighs" in w for w in from_table.warnings), from_table.warnings
    assert {c.choices["flop_heuristic"].label for c in from_table.conditions} == {"single"}
    with_flops = _run(TWIN_EVAL, (f"map_table={tmp_path / 'twin' / 'results.csv'}",))
    assert not any("flop_heuristic" in w for w in with_flops.warnings)
    assert len(twin.rows) == len(rows)


def test_a_skipped_decoder_cell_names_its_output_tokens() -> None:
    """The console named an encoder's tokens only: a decoder's cells that differ in output
    tokens alone printed the same line."""
    encoder = SkippedCell(4, 400.0, 197, ("prism cr 9.9 x2",))
    decoder = SkippedCell(2, 300.0, 256, ("prism cr 4 x2",), output_tokens=32)
    assert skipped_line(encoder) == (
        "skipped batch 4, 400 Mbps, 197 tokens: not measured for prism cr 9.9 x2"
    )
    assert skipped_line(decoder) == (
        "skipped batch 2, 300 Mbps, 256 prompt and 32 output tokens: not measured for prism cr 4 x2"
    )


def test_a_cell_without_the_ranked_value_is_skipped(tmp_path: Path) -> None:
    """Energy measured for every candidate at batch 8, not for Prism at batch 16: that cell
    cannot be scored by energy and is skipped (its regret was inf, written as Infinity in
    evaluation.json)."""
    rows = [
        "strategy,devices,batch,bandwidth_mbps,cr,segments,total_ms,energy_j",
        "single,1,8,400,,,100,1.0",
        "voltage,2,8,400,,,300,2.0",
        "prism,2,8,400,9.9,10,105,1.5",
        "single,1,16,400,,,200,2.0",
        "voltage,2,16,400,,,500,4.0",
        "prism,2,16,400,9.9,10,150,",
    ]
    table = tmp_path / "measured.csv"
    table.write_text("\n".join(rows) + "\n")
    result = _run(JETSON_EVAL, (f"truth_table={table}", "objective=energy"))
    (condition,) = result.conditions
    assert condition.oracle == "single"
    assert [(cell.batch, cell.missing) for cell in result.skipped] == [(16, ("prism cr 9.9 x2",))]
    assert all(math.isfinite(score.max_regret_pct) for score in result.scores.values())
    latency = _run(JETSON_EVAL, (f"truth_table={table}",))  # the latency of both is known
    assert len(latency.conditions) == 2 and not latency.skipped


def test_an_energy_objective_needs_energies(tmp_path: Path) -> None:
    """A truth table without energy said 'every candidate fails at every held-out
    condition'; a twin whose profiles have powers of 0 (no meter) was a ZeroDivisionError
    (weighted) or ranked zeros (energy)."""
    with pytest.raises(InputError, match="objective energy ranks by energy_j") as caught:
        _run(EMU_EVAL, ("objective=energy",))
    assert caught.value.field == "energy_j"
    assert Path(str(caught.value.path)).resolve() == EMU_TRUTH.resolve()
    twin = ("truth_table=null", "held_out={batch: [1], bandwidth_mbps: [30]}")
    for objective in ("energy", "weighted"):
        with pytest.raises(InputError, match="twin predicts none above 0") as caught:
            _run(EMU_EVAL, (*twin, f"objective={objective}"))
        assert caught.value.field == "devices"


def test_the_cli_says_where_the_truth_comes_from(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "edgetwin", "evaluate", str(JETSON_EVAL), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ground truth: table measurements.csv, 3 conditions" in done.stdout
    assert "skipped batch 4, 400 Mbps" in done.stdout
    written = json.loads((out / "evaluation.json").read_text())
    assert written["held_out"] is None
    page = (out / "evaluation.html").read_text()
    assert "measured runs" in page and "1 cell skipped" in page
    # the page names the measured truth as such, in its text and its figures
    assert re.findall(r"\btwin\b[^;]*;", page) == ["twin;"]  # the map's source alone
    assert "Rows: best measured" in page and "lost against the best measured" in page


EMU_EVAL = REPO / "scenarios" / "adaptive_emu.eval.yaml"
EMU_DATA = REPO / "data" / "traces" / "emu-vit-loop-2026-12"
EMU_TRUTH = EMU_DATA / "truth" / "results.csv"


def _emulated_medians() -> dict[tuple[int, float], dict[str, float]]:
    """(batch, bandwidth) -> candidate label -> median total_ms of the emulator's reps."""
    labels = {"single": "single", "voltage": "voltage x2", "prism": "prism cr 9.9 x2"}
    reps: dict[tuple[int, float], dict[str, list[float]]] = {}
    with (EMU_DATA / "truth" / "results.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            assert row["mode"] == "emu" and row["status"] == "ok"
            cell = reps.setdefault((int(row["batch"]), float(row["bandwidth_mbps"])), {})
            cell.setdefault(labels[row["strategy"]], []).append(float(row["total_ms"]))
    return {cell: {k: median(v) for k, v in here.items()} for cell, here in reps.items()}


def test_the_emulator_evaluation_scores_against_the_emulated_runs() -> None:
    """The truth is the emulator's medians at every cell; the map is the twin's."""
    result = _run(EMU_EVAL)
    measured = _emulated_medians()
    assert {(c.batch, c.bandwidth_mbps) for c in result.conditions} == set(measured)
    assert not result.skipped
    for condition in result.conditions:
        here = measured[(condition.batch, condition.bandwidth_mbps)]
        assert {k: v.latency_ms for k, v in condition.truth.items()} == pytest.approx(here)
        assert condition.oracle == min(here, key=here.__getitem__)
        assert not condition.in_map  # every cell lies off the map's grid


def test_the_emulator_evaluations_profile_is_fitted_from_the_shipped_sweep() -> None:
    """The map's profile is what calibrating from the shipped emulator sweep gives."""
    fitted = calibrate_from_emu(EMU_DATA / "machine" / "spec.yaml", "test")
    shipped = load_profile(str(EMU_DATA / "machine" / "profile.yaml"))
    for section in ("compute", "staging", "network"):
        assert getattr(fitted, section) == getattr(shipped, section), section
    scenario = load_scenario(REPO / "scenarios" / "adaptive_emu.yaml")
    named = (REPO / "scenarios" / scenario.devices[0].profile).resolve()
    assert named == (EMU_DATA / "machine" / "profile.yaml").resolve()


def test_an_emu_spec_is_not_validated_by_leave_one_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its check is a held-out emulator sweep; validate says so, naming the file and field."""
    spec = EMU_DATA / "machine" / "spec.yaml"
    assert cli_main(["validate", str(spec), "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert f"{spec}: field 'kind'" in err and "bench_emu_loop.py" in err
    assert not (tmp_path / "v").exists()

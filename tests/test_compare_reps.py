"""Repeated measurements in a comparison: each configuration is one point per metric, the
median of its rows on each side (its repetitions), so a table with several repetitions
compared with itself is exact, one disturbed repetition does not move a point, and a real
difference still shows."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from statistics import median

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.comparison import compare_to_reference
from edgetwin.result_cells import read_results
from edgetwin.row_keys import RowKey, row_key
from edgetwin.table_files import read_table

JETSON = Path(__file__).resolve().parents[1] / "scenarios" / "prism_jetson.yaml"
SMALL = ["sweeps=[{batch: [1, 2]}]"]
REPEATED = [*SMALL, "repetitions=3", "noise_cv=0.1"]


@pytest.fixture(scope="module")
def repeated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A twin run of 3 repetitions a configuration, each moved by the noise."""
    folder = tmp_path_factory.mktemp("reps") / "run"
    edgetwin.run(JETSON, overrides=REPEATED, out=folder)
    return folder


def _totals(rows: list[dict[str, str]]) -> dict[RowKey, list[float]]:
    totals: dict[RowKey, list[float]] = defaultdict(list)
    for row in rows:
        totals[row_key(row)].append(float(row["total_ms"]))
    return totals


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    path.mkdir()
    with (path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_table_of_several_repetitions_compared_with_itself_is_exact(
    repeated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each measured repetition was a point against the mean of the predicted ones: the
    spread of the repetitions was an error (0.6-3 % here) and each configuration counted
    three times."""
    totals = _totals(read_table(repeated / "results.csv"))
    assert {len(reps) for reps in totals.values()} == {3}
    assert all(len(set(reps)) == 3 for reps in totals.values())  # the noise moved each
    comparison = edgetwin.compare(repeated, repeated)
    assert [p["key"] for p in comparison.points if p["metric"] == "total_ms"] == list(totals)
    assert comparison.points
    assert all(p["measured"] == p["predicted"] for p in comparison.points)
    assert all(p["error_pct"] in (0.0, None) for p in comparison.points)  # None: measured 0
    assert set(comparison.median_abs_error_pct.values()) == {0.0}
    for point in (p for p in comparison.points if p["metric"] == "total_ms"):
        assert point["measured"] == point["predicted"] == median(totals[point["key"]])
    assert main(["compare", str(repeated), str(repeated)]) == 0
    out = capsys.readouterr().out
    assert f"total_ms: median |error| 0.0 % over {len(totals)} points" in out


def test_a_disturbed_repetition_does_not_move_the_point(repeated: Path) -> None:
    """One repetition of each configuration three times as slow (other work on the machine),
    the repetitions in another order: each point is still the configuration's median."""
    rows = read_table(repeated / "results.csv")
    slowest: dict[RowKey, dict[str, str]] = {}
    for row in rows:
        key = row_key(row)
        if key not in slowest or float(row["total_ms"]) > float(slowest[key]["total_ms"]):
            slowest[key] = row
    for row in slowest.values():
        row["total_ms"] = repr(3 * float(row["total_ms"]))
    comparison = compare_to_reference(read_results(repeated / "results.csv"), rows[::-1])
    totals = [p for p in comparison.points if p["metric"] == "total_ms"]
    assert len(totals) == len(slowest)
    assert all(p["error_pct"] == 0.0 for p in totals)


def test_a_difference_between_repeated_runs_still_shows(repeated: Path, tmp_path: Path) -> None:
    rows = read_table(repeated / "results.csv")
    for row in rows:  # measured 25 % slower, every repetition
        row["total_ms"] = repr(1.25 * float(row["total_ms"]))
    slower = _write(tmp_path / "slower", rows)
    comparison = edgetwin.compare(repeated, slower)
    totals = [p for p in comparison.points if p["metric"] == "total_ms"]
    assert len(totals) == len(_totals(rows))
    assert all(p["error_pct"] == pytest.approx(-20.0) for p in totals)
    assert comparison.median_abs_error_pct["total_ms"] == pytest.approx(20.0)
    assert comparison.median_abs_error_pct["compute_ms"] == 0.0  # unchanged: still exact
    edgetwin.run(JETSON, overrides=[*REPEATED, "seed=1"], out=tmp_path / "other_seed")
    reseeded = edgetwin.compare(tmp_path / "other_seed", repeated)
    assert reseeded.median_abs_error_pct["total_ms"] > 0


def test_one_prediction_against_several_repetitions(repeated: Path, tmp_path: Path) -> None:
    """A run of one repetition (no noise) against one of three: each point's measured value
    is the median of that configuration's three."""
    edgetwin.run(JETSON, overrides=SMALL, out=tmp_path / "once")
    comparison = edgetwin.compare(tmp_path / "once", repeated)
    predicted = _totals(read_table(tmp_path / "once" / "results.csv"))
    measured = _totals(read_table(repeated / "results.csv"))
    totals = [p for p in comparison.points if p["metric"] == "total_ms"]
    assert len(totals) == len(measured) == len(predicted)
    for point in totals:
        assert point["measured"] == median(measured[point["key"]])
        assert [point["predicted"]] == predicted[point["key"]]

"""``edgetwin.compare``: what ``edgetwin compare`` prints and writes, from Python, as a
``Comparison`` (points, median |error| per metric, unmatched rows, warnings)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError

JETSON = Path(__file__).resolve().parents[1] / "scenarios" / "prism_jetson.yaml"
SMALL = ["sweeps=[{batch: [1, 2]}]"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    edgetwin.run(JETSON, overrides=SMALL, out=root / "a")
    edgetwin.run(JETSON, overrides=[*SMALL, "noise_cv=0.1"], out=root / "b")
    return root / "a", root / "b"


@pytest.mark.timeout(120)
def test_compare_returns_what_the_command_writes(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_runs
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cli")]) == 0
    comparison = edgetwin.compare(a, str(b), out=tmp_path / "api")
    cli_csv = (tmp_path / "cli" / "comparison.csv").read_bytes()
    assert (tmp_path / "api" / "comparison.csv").read_bytes() == cli_csv
    assert (tmp_path / "api" / "comparison.html").is_file()
    recorded = json.loads((tmp_path / "api" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.compare", str(a), str(b)]
    assert str(a / "results.csv") in recorded["inputs"]  # what it read, with SHA-256
    assert comparison.median_abs_error_pct["total_ms"] > 0  # the noise moved every point
    assert {p["metric"] for p in comparison.points} >= {"total_ms", "energy_j"}
    assert comparison.unmatched_keys == comparison.unmeasured_keys == []
    assert comparison.warnings == ()
    itself = edgetwin.compare(a, a)  # no out: nothing written
    assert set(itself.median_abs_error_pct.values()) == {0.0}


@pytest.mark.timeout(120)
def test_describe_gives_the_lines_the_command_prints(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Comparison had no ``describe()``: how many points each median is over, whether
    ``bytes_sent`` agree and the rows left out were what ``edgetwin compare`` printed and
    a notebook had to work out from ``points`` and ``bytes_points``."""
    a, _ = two_runs
    fewer = tmp_path / "fewer"
    edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1]}]"], out=fewer)
    assert main(["compare", str(a), str(fewer)]) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = edgetwin.compare(a, fewer).describe()
    assert lines == printed
    assert "total_ms: median |error| 0.0 % over 5 points" in lines
    assert "bytes_sent: equal in 5 configurations" in lines
    not_compared = "not compared: 0 measured rows with no prediction, 5 predicted rows with no"
    assert lines[-1] == f"{not_compared} measured row"


@pytest.mark.timeout(120)
def test_the_page_warns_as_the_console_does(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Two runs on other devices: the console warned that the errors include the devices'
    difference, the page showed the errors without a word of it."""
    other = [*SMALL, "devices=[{name: jetson, profile: h200_netns, count: 2}]"]
    edgetwin.run(JETSON, overrides=other, out=tmp_path / "h200", progress=None)
    comparison = edgetwin.compare(two_runs[0], tmp_path / "h200", out=tmp_path / "c")
    (warning,) = comparison.warnings
    page = (tmp_path / "c" / "comparison.html").read_text()
    assert f"<p class='warning'><b>Warning:</b> {html.escape(warning)}</p>" in page


@pytest.mark.timeout(120)
def test_the_measured_side_may_be_a_published_table(tmp_path: Path) -> None:
    """A run against the table it names as its reference: what the run's own report
    compares (the run copies the table as reference.csv), with no folder made for it."""
    run = tmp_path / "run"
    edgetwin.run(JETSON, out=run)
    published = Path(__file__).resolve().parents[1] / "data/reference/prism-jetson/measurements.csv"
    against_table = edgetwin.compare(run, published)
    copied = tmp_path / "copied"
    copied.mkdir()
    shutil.copyfile(published, copied / "results.csv")
    assert against_table == edgetwin.compare(run, copied)
    assert against_table.median_abs_error_pct["total_ms"] > 0
    notes = tmp_path / "notes.txt"
    notes.write_text("not a table\n")
    with pytest.raises(InputError, match="a file, not a run's output folder"):
        edgetwin.compare(run, notes)  # a table is a .csv


@pytest.mark.timeout(120)
def test_bad_compare_arguments_name_the_argument_or_the_file(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _b = two_runs
    with pytest.raises(InputError) as raised:
        edgetwin.compare(a, 7)  # type: ignore[arg-type]
    assert raised.value.field == "measured"
    with pytest.raises(InputError) as raised:
        edgetwin.compare(a, a, force="no")  # type: ignore[arg-type]
    assert raised.value.field == "force"
    with pytest.raises(InputError, match="file not found") as raised:
        edgetwin.compare(a, tmp_path / "nope", out=tmp_path / "c")
    assert raised.value.path == str(tmp_path / "nope" / "results.csv")
    assert not (tmp_path / "c").exists()
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    with pytest.raises(InputError) as raised:  # a non-empty out without force, refused first
        edgetwin.compare(a, a, out=taken)
    assert "--out (out= in Python) is not empty" in raised.value.problem
    assert "pass --force (force=True in Python)" in raised.value.problem
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]


def test_a_side_whose_rows_all_failed_is_named(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Two runs of one sweep, one of which failed throughout, said 'no configuration in
    common'."""
    a, _b = two_runs
    failed = tmp_path / "failed"
    shutil.copytree(a, failed)
    table = failed / "results.csv"
    lines = table.read_text().splitlines()
    header = lines[0].split(",")
    emptied = {"compute_ms", "staging_ms", "comm_ms", "total_ms", "per_sample_ms", "energy_j"}
    rows = []
    for line in lines[1:]:
        cells = line.split(",")
        cells = ["" if name in emptied else cell for name, cell in zip(header, cells, strict=True)]
        cells[header.index("status")] = "failed: out of memory"
        rows.append(",".join(cells))
    table.write_text("\n".join([lines[0], *rows]) + "\n")
    for predicted, measured in ((a, failed), (failed, a)):
        with pytest.raises(InputError) as raised:
            edgetwin.compare(predicted, measured)
        assert raised.value.path == str(table)
        assert raised.value.problem == "every row failed (its status says why): nothing to compare"


@pytest.mark.timeout(120)
def test_a_parquet_only_folder_compares_as_its_csv_does(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """A run written with format="parquet" has no results.csv; compare reads its
    results.parquet on either side (it used to refuse the folder), at full precision where
    the CSV holds 7 significant digits."""
    a, b = two_runs
    both, only = tmp_path / "both", tmp_path / "pq"
    edgetwin.run(JETSON, overrides=[*SMALL, "noise_cv=0.1"], out=both, format="both")
    shutil.copytree(both, only)
    (only / "results.csv").unlink()
    for from_csv, from_parquet in (
        (edgetwin.compare(a, both), edgetwin.compare(a, only)),
        (edgetwin.compare(both, b), edgetwin.compare(only, b)),
    ):
        assert [p["key"] for p in from_parquet.points] == [p["key"] for p in from_csv.points]
        for csv_point, parquet_point in zip(from_csv.points, from_parquet.points, strict=True):
            for side in ("measured", "predicted"):
                assert parquet_point[side] == pytest.approx(csv_point[side], rel=1e-6)
        assert from_parquet.median_abs_error_pct.keys() == from_csv.median_abs_error_pct.keys()
        assert from_parquet.median_abs_error_pct["total_ms"] > 0  # noise_cv moved every point
    assert main(["compare", str(only), str(a), "--out", str(tmp_path / "c")]) == 0
    read = json.loads((tmp_path / "c" / "provenance.json").read_text())["inputs"]
    assert str(only / "results.parquet") in read  # what it read, with SHA-256


@pytest.mark.timeout(120)
def test_a_parquet_table_may_stand_for_the_measured_folder(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """A results table given in place of the measured folder had to be a .csv: a run
    folder's results.parquet (format="parquet") was refused, 'give its folder'. Either
    table compares as its folder does."""
    a, _ = two_runs
    edgetwin.run(JETSON, overrides=[*SMALL, "noise_cv=0.1"], out=tmp_path / "pq", format="parquet")
    table = tmp_path / "pq" / "results.parquet"
    from_folder, from_table = edgetwin.compare(a, tmp_path / "pq"), edgetwin.compare(a, table)
    assert from_table.points == from_folder.points
    assert from_table.median_abs_error_pct == from_folder.median_abs_error_pct
    assert main(["compare", str(a), str(table)]) == 0


@pytest.mark.timeout(120)
def test_a_side_with_no_rows_is_named(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    """A predicted table with a header and no rows was blamed on the measured folder ('no
    configuration in common'); a measured one compared as if it had rows."""
    a, _ = two_runs
    empty = tmp_path / "empty"
    empty.mkdir()
    header = (a / "results.csv").read_text().splitlines()[0]
    (empty / "results.csv").write_text(header + "\n")
    for predicted, measured in ((empty, a), (a, empty)):
        with pytest.raises(InputError, match="a header and no rows") as raised:
            edgetwin.compare(predicted, measured)
        assert raised.value.path == str(empty / "results.csv")


@pytest.mark.timeout(120)
def test_runs_with_nothing_in_common_show_a_configuration_of_each(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Two sweeps at other bandwidths said 'no configuration in common' and left the user to
    find out why: the error shows a configuration of each side."""
    a, _ = two_runs
    other = tmp_path / "other"
    edgetwin.run(JETSON, overrides=[*SMALL, "network.bandwidth_mbps=500"], out=other)
    with pytest.raises(InputError) as raised:
        edgetwin.compare(a, other)
    assert raised.value.path == str(other / "results.csv")
    assert raised.value.problem.startswith(
        "no configuration in common: predicted rows are e.g. [single, 1 dev, batch 1, 400 "
        "Mbit/s], measured rows e.g. [single, 1 dev, batch 1, 500 Mbit/s]"
    )


@pytest.mark.timeout(120)
def test_to_pandas_gives_the_points_typed_as_results_are(two_runs: tuple[Path, Path]) -> None:
    """A Comparison's points were dicts to wrap in a DataFrame (the key a tuple in one
    column): ``to_pandas()`` gives the key's parts as the results columns they come from,
    typed as ``Results.to_pandas()`` types them, then the metric and its values."""
    a, b = two_runs
    comparison = edgetwin.compare(a, b)
    frame = comparison.to_pandas()
    assert list(frame.columns) == [
        *("strategy", "devices", "batch", "bandwidth_mbps", "segments"),
        *("metric", "measured", "predicted", "error_pct"),
    ]
    typed = edgetwin.load_results(a).to_pandas().dtypes
    assert all(frame.dtypes[c] == typed[c] for c in frame.columns[:5])
    assert str(frame.dtypes["metric"]) == "string" and str(frame.dtypes["error_pct"]) == "float64"
    assert len(frame) == len(comparison.points)
    first = comparison.points[0]
    assert tuple(frame.iloc[0][["measured", "predicted", "error_pct"]]) == (
        first["measured"],
        first["predicted"],
        first["error_pct"],
    )
    prism = frame[frame.strategy == "prism"]
    assert set(prism.segments) == {10, 20, 30} and set(frame.batch) == {1, 2}

"""``edgetwin.report``: a run's report written again from its folder, from Python, as
``edgetwin report`` writes it (with its figures as static files if asked)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import edgetwin
from edgetwin.errors import InputError

JETSON = Path(__file__).resolve().parents[1] / "scenarios" / "prism_jetson.yaml"
REPORT_IN_PYTHON = """
import sys, edgetwin
try:
    edgetwin.report(sys.argv[1])
except edgetwin.InputError as exc:
    print(exc.message)
"""


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1, 2]}]"], out=tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.timeout(120)
def test_report_writes_the_page_again(run_dir: Path) -> None:
    page = run_dir / "report.html"
    run_wrote = page.read_bytes()
    page.unlink()
    written = edgetwin.report(str(run_dir))
    assert written == edgetwin.Report(page) and 'class="plotly-graph-div"' in page.read_text()
    assert page.read_bytes() == run_wrote  # the same page, title and all


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_report_exports_the_figures_when_asked(run_dir: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")
    written = edgetwin.report(run_dir, static="svg")
    assert written.figures and sorted(written.figures) == sorted((run_dir / "figures").iterdir())
    drawn = (run_dir / "report.html").read_text().count('class="plotly-graph-div"')
    assert len(written.figures) == drawn


@pytest.mark.timeout(120)
def test_bad_report_arguments_name_the_argument_or_the_file(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.report(run_dir, static="gif")  # type: ignore[arg-type]
    assert raised.value.field == "static"
    with pytest.raises(InputError, match="file not found") as raised:
        edgetwin.report(tmp_path / "empty")
    assert raised.value.path == str(tmp_path / "empty" / "results.csv")
    with pytest.raises(InputError) as raised:
        edgetwin.report(None)  # type: ignore[arg-type]
    assert raised.value.field == "folder"


def test_a_folder_name_too_long_is_an_input_error(tmp_path: Path) -> None:
    """Looking for a plan's files in it was an OSError traceback (File name too long);
    ``load_results`` said so as an InputError."""
    long_name = tmp_path / ("x" * 5000)
    with pytest.raises(InputError, match="cannot be read: File name too long") as raised:
        edgetwin.report(long_name)
    assert raised.value.path == str(long_name)


@pytest.mark.timeout(120)
def test_a_parquet_only_folder_is_reported_from_its_parquet(tmp_path: Path) -> None:
    """A run written with format="parquet" has no results.csv: the report reads its
    results.parquet (it used to refuse the folder) and draws what the CSV's report draws."""
    both, only = tmp_path / "both", tmp_path / "pq"
    edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1, 2]}]"], out=both, format="both")
    shutil.copytree(both, only)
    (only / "results.csv").unlink()
    (only / "report.html").unlink()
    assert edgetwin.report(only) == edgetwin.Report(only / "report.html")
    page, run_wrote = (only / "report.html").read_text(), (both / "report.html").read_text()
    assert "<title>edgetwin: prism_jetson</title>" in page
    drawn = page.count('class="plotly-graph-div"')
    assert drawn == run_wrote.count('class="plotly-graph-div"') > 0
    (only / "results.parquet").write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(InputError, match="cannot read") as raised:
        edgetwin.report(only)
    assert raised.value.path == str(only / "results.parquet")


def _report_read_only(folder: Path) -> subprocess.CompletedProcess[str]:
    """``edgetwin.report(folder)`` in a child that cannot write into ``folder``: as root
    (whom no mode stops), in a mount namespace of its own where ``folder`` is mounted
    read-only; else with the folder's mode 0o555."""
    python = [sys.executable, "-c", REPORT_IN_PYTHON, str(folder)]
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return subprocess.run(python, capture_output=True, text=True)
    if shutil.which("unshare") is None:
        pytest.skip("unshare is needed to make a folder read-only for root")
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    script = f'{mount} && exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *python], capture_output=True, text=True
    )
    if "mount:" in done.stderr or "unshare:" in done.stderr:
        pytest.skip(f"no read-only mount here: {done.stderr.strip()}")
    return done


@pytest.mark.timeout(120)
def test_a_folder_without_write_permission_is_an_input_error(run_dir: Path) -> None:
    """Writing the page was an OSError traceback (Read-only file system, Permission
    denied); the folder is left as it was."""
    before = sorted(p.name for p in run_dir.iterdir())
    done = _report_read_only(run_dir)
    run_dir.chmod(0o755)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith(f"{run_dir}: cannot write into it: "), done.stdout
    assert sorted(p.name for p in run_dir.iterdir()) == before


@pytest.mark.timeout(120)
def test_a_broken_context_file_is_refused_by_every_reader_of_the_folder(run_dir: Path) -> None:
    """load_results refused a provenance.json, devices.yaml or scenario.resolved.yaml that
    does not read, where report (and compare, for provenance.json and a resolved file of
    an unknown key) passed over it: one folder could be reported but not loaded. Each
    reader now refuses it, naming the file, and writes nothing."""
    page = (run_dir / "report.html").read_bytes()
    other = run_dir.parent / "other"
    shutil.copytree(run_dir, other)
    broken = {
        "provenance.json": "[1, 2",
        "devices.yaml": "jetson: [1, 2]\n",
        "scenario.resolved.yaml": "name: x\nnot_a_field: 1\n",
    }
    for name, text in broken.items():
        kept = (run_dir / name).read_bytes()
        (run_dir / name).write_text(text)
        readers = {
            "load_results": lambda: edgetwin.load_results(run_dir),
            "report": lambda: edgetwin.report(run_dir),
            "compare, predicted": lambda: edgetwin.compare(run_dir, other),
            "compare, measured": lambda: edgetwin.compare(other, run_dir),
        }
        for reader, call in readers.items():
            with pytest.raises(InputError) as raised:
                call()
            assert raised.value.path == str(run_dir / name), (name, reader)
        assert (run_dir / "report.html").read_bytes() == page
        (run_dir / name).write_bytes(kept)

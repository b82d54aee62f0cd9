"""The files a runner writes into a run folder (``link_check.csv``, ``faults.csv``,
``trace.json``, ``timeline.json``, ``traces/``) travel with its ``Results``: a folder read by
``load_results`` and written elsewhere holds them, byte for byte, and so does the page drawn
from them; so does what ``run`` returns, written."""

from __future__ import annotations

import shutil
from pathlib import Path

import edgetwin
from edgetwin.emu.mininet.faults import FaultRecord, write_faults
from tests.conftest import REPO

CROWD = REPO / "scenarios" / "crowdio_android.yaml"
JETSON = REPO / "scenarios" / "prism_jetson.yaml"
EMU_RUN = REPO / "data" / "traces" / "emu-vit-loop-2026-12" / "fit"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its path in it, but the provenance (which names the
    command that wrote the folder)."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "provenance.json"
    }


def test_a_traced_crowd_run_written_elsewhere_keeps_its_timeline_and_its_figures(
    tmp_path: Path,
) -> None:
    """``timeline.json`` was lost, and with it the page's timelines (Gantt, RAM, battery)."""
    ran = edgetwin.run(CROWD, out=tmp_path / "run", trace=True)
    shipped = _files(tmp_path / "run")
    assert "timeline.json" in shipped
    assert _files(edgetwin.load_results(tmp_path / "run").write(tmp_path / "again")) == shipped
    assert _files(ran.write(tmp_path / "returned")) == shipped


def test_a_traced_twin_run_written_elsewhere_keeps_its_trace(tmp_path: Path) -> None:
    sweep = ["sweeps=[{batch: [1, 8]}]"]
    ran = edgetwin.run(JETSON, overrides=sweep, out=tmp_path / "run", trace=True)
    shipped = _files(tmp_path / "run")
    assert "trace.json" in shipped
    assert _files(edgetwin.load_results(tmp_path / "run").write(tmp_path / "again")) == shipped
    assert _files(ran.write(tmp_path / "returned")) == shipped


def test_an_emulator_runs_faults_and_a_local_runs_traces_survive_write(tmp_path: Path) -> None:
    """``faults.csv`` (faults or a bandwidth schedule played) and ``traces/`` (a local run's
    profiler traces) were lost; the results carry them, not the folder they came from."""
    run = tmp_path / "run"
    shutil.copytree(EMU_RUN, run)
    record = FaultRecord("prism b8 400 Mbps rep 0", "bandwidth", None, "200 Mbit/s", 0.5, 0.51)
    write_faults(run / "faults.csv", [record])
    (run / "traces").mkdir()
    (run / "traces" / "trace_prism_b8_rank0.json").write_text('{"traceEvents": []}')
    runners = {name: data for name, data in _files(run).items() if name != "results.csv"}
    runners.pop("scenario.resolved.yaml")  # rewritten from the scenario it holds
    again = _files(edgetwin.load_results(run).write(tmp_path / "again"))
    assert {name: again.get(name) for name in runners} == runners
    shutil.rmtree(run)
    assert _files(edgetwin.load_results(tmp_path / "again").write(tmp_path / "third")) == again

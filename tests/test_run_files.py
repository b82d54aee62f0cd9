"""The files a runner writes into a run folder (``link_check.csv``, ``faults.csv``,
``trace.json``, ``timeline.json``, ``warnings.json``, ``traces/``) travel with its
``Results``: a folder read by ``load_results`` and written elsewhere holds them, byte for
byte, and so does the page drawn from them; so does what ``run`` returns, written."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from pathlib import Path
from typing import Any

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.emu.mininet.faults import FaultRecord, write_faults
from edgetwin.errors import InputError
from edgetwin.provenance import read_provenance, sha256_file
from tests.conftest import REPO

CROWD = REPO / "scenarios" / "crowdio_android.yaml"
JETSON = REPO / "scenarios" / "prism_jetson.yaml"
EMU_RUN = REPO / "data" / "traces" / "emu-vit-loop-2026-12" / "fit"
LLM = REPO / "scenarios" / "llm_smoke.yaml"
SHORT_LINK_RUN = REPO / "data" / "traces" / "emu-crowdio-wifi-store-2026-12b"  # one link short
# the counters of the opens being watched (_opened), each with whether it counts writes only
_OPENS: list[tuple[Counter[str], bool]] = []


def _count_open(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _OPENS and isinstance(args[0], str | os.PathLike):
        opens, writes_only = _OPENS[-1]
        if not writes_only or args[2] & (os.O_WRONLY | os.O_RDWR):  # args: path, mode, flags
            opens[os.path.abspath(args[0])] += 1


sys.addaudithook(_count_open)  # a hook stays for the process; it counts only in _opened


@contextmanager
def _opened(writes_only: bool = False) -> Iterator[Counter[str]]:
    """How many times each file (by absolute path) is opened within the block (for
    writing, with ``writes_only``)."""
    _OPENS.append((Counter(), writes_only))
    try:
        yield _OPENS[-1][0]
    finally:
        _OPENS.pop()


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


def test_run_writes_the_runners_files_into_its_folder_once(tmp_path: Path) -> None:
    """run wrote them into the staging folder twice, the same bytes: the runner, then
    ``Results.write_into`` from what it read back."""
    with _opened(writes_only=True) as writes:
        ran = edgetwin.run(CROWD, out=tmp_path / "run", trace=True)
    assert set(ran.run_files) == {"timeline.json"}
    assert sum(n for path, n in writes.items() if Path(path).name == "timeline.json") == 1


def test_an_emulator_runs_faults_and_a_local_runs_traces_survive_write(tmp_path: Path) -> None:
    """``faults.csv`` (faults or a bandwidth schedule played) and ``traces/`` (a local run's
    profiler traces) were lost; the results carry them, not the folder they came from."""
    run = tmp_path / "run"
    shutil.copytree(EMU_RUN, run)
    record = FaultRecord("prism b8 400 Mbps rep 0", "bandwidth", None, "200 Mbit/s", 0.5, 0.5, 0.51)
    write_faults(run / "faults.csv", [record])
    (run / "traces").mkdir()
    (run / "traces" / "trace_prism_b8_rank0.json").write_text('{"traceEvents": []}')
    runners = {name: data for name, data in _files(run).items() if name != "results.csv"}
    runners.pop("scenario.resolved.yaml")  # rewritten from the scenario it holds
    again = _files(edgetwin.load_results(run).write(tmp_path / "again"))
    assert {name: again.get(name) for name in runners} == runners
    shutil.rmtree(run)
    assert _files(edgetwin.load_results(tmp_path / "again").write(tmp_path / "third")) == again


def test_load_results_and_compare_read_each_file_once(tmp_path: Path) -> None:
    """load_results read a decoder run's scenario.resolved.yaml twice (the RAM lines'
    warnings) and link_check.csv twice; compare read the measured table twice, and opened
    each file it read once more to hash it for the provenance (it hashes the bytes read)."""
    decoder = tmp_path / "decoder"
    edgetwin.run(LLM, out=decoder)
    emu = tmp_path / "emu"
    shutil.copytree(EMU_RUN, emu)
    measured = tmp_path / "measured.csv"
    shutil.copyfile(decoder / "results.csv", measured)
    watched = {
        "decoder scenario": decoder / "scenario.resolved.yaml",
        "decoder results": decoder / "results.csv",
        "link checks": emu / "link_check.csv",
        "measured table": measured,
    }
    with _opened() as opens:
        edgetwin.load_results(decoder)
        edgetwin.load_results(emu)
        edgetwin.compare(decoder, measured, out=tmp_path / "compared")
    counted = {name: opens[str(path)] for name, path in watched.items()}
    # load_results's opens, then compare's
    once = {"decoder scenario": 1 + 1, "decoder results": 1 + 1, "link checks": 1}
    assert counted == {**once, "measured table": 1}
    record = read_provenance(tmp_path / "compared")
    assert record is not None  # the hashes of the bytes read are the files' hashes
    assert {record["inputs"][str(path)] for path in watched.values() if path.parent != emu} == {
        sha256_file(decoder / "scenario.resolved.yaml"),
        sha256_file(measured),  # the decoder's results.csv, copied
    }


def test_report_reads_each_file_once(tmp_path: Path) -> None:
    """edgetwin report read a decoder run's scenario.resolved.yaml twice (checked, then
    for the RAM lines), and every run's results.csv and reference.csv twice (checked,
    then for the page)."""
    decoder, encoder = tmp_path / "decoder", tmp_path / "encoder"
    edgetwin.run(LLM, out=decoder)
    edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1, 8]}]"], out=encoder)
    for folder in (decoder, encoder):
        read = sorted(p.name for p in folder.iterdir() if p.name != "report.html")
        with _opened() as opens:
            assert main(["report", str(folder)]) == 0
        assert {name: opens[str(folder / name)] for name in read} == dict.fromkeys(read, 1)
    assert "reference.csv" in read  # the encoder's, read as the decoder's context files


def test_a_runs_warnings_are_kept_in_its_folder_and_shown_on_its_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A schedule step no run reached was said on the console and in ``Results.warnings``,
    but the folder kept none of it: its page, ``load_results`` and ``edgetwin report`` (here
    or wherever the folder was copied) did not say it."""
    late = "network.schedule=[{at_ms: 1000, bandwidth_mbps: 50}]"
    voltage = ["sweeps=[{batch: [1, 8]}]", "strategies=[{name: voltage}]", late]
    run = tmp_path / "run"
    ran = edgetwin.run(JETSON, overrides=voltage, out=run)
    (warning,) = ran.warnings
    assert warning.startswith("network.schedule step to 50 Mbps at 1 s did not play in 1 of 2")
    assert json.loads((run / "warnings.json").read_text()) == [warning]
    page = (run / "report.html").read_text()
    assert page.count(escape(warning)) == 1
    assert edgetwin.load_results(run).warnings == (warning,)
    (run / "report.html").unlink()
    assert main(["report", str(run)]) == 0
    assert (run / "report.html").read_text() == page
    assert f"edgetwin: warning: {warning}\n" in capsys.readouterr().err
    assert _files(edgetwin.load_results(run).write(tmp_path / "again")) == _files(run)
    assert _files(ran.write(tmp_path / "returned")) == _files(run)


def test_a_folder_without_warnings_json_reports_as_before_each_warning_once(
    tmp_path: Path,
) -> None:
    """An emulator folder of an older edgetwin keeps no warnings.json: its page warns of the
    link its link check finds short, as before. A run's own copy of that warning (the run
    said it too) is shown once, beside the run's other warnings."""
    old = tmp_path / "old"
    shutil.copytree(SHORT_LINK_RUN, old)
    (short,) = edgetwin.load_results(old).warnings
    assert short.startswith("link etwh1 -> etwh0 set to 20 Mbps")
    written = edgetwin.load_results(old).write(tmp_path / "again")
    assert not (written / "warnings.json").exists()
    assert (written / "report.html").read_text().count(escape(short)) == 1
    cores = "emulator.host_cpu_cores add up to 8 cores, more than this machine's 4"
    (old / "warnings.json").write_text(json.dumps([cores, short]))
    assert edgetwin.load_results(old).warnings == (cores, short)
    page = edgetwin.report(old).page.read_text()
    assert [page.count(escape(w)) for w in (cores, short)] == [1, 1]


@pytest.mark.parametrize(
    ("text", "field"), [("{}", None), ('["a", 3]', "1"), ("[", None), ('[""]', "0")]
)
def test_a_broken_warnings_json_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, field: str | None
) -> None:
    run = tmp_path / "run"
    shutil.copytree(SHORT_LINK_RUN, run)
    (run / "warnings.json").write_text(text)
    with pytest.raises(InputError) as raised:
        edgetwin.load_results(run)
    assert (raised.value.path, raised.value.field) == (str(run / "warnings.json"), field)
    assert main(["report", str(run)]) == 2
    assert "warnings.json" in capsys.readouterr().err

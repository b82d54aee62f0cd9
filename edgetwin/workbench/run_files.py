"""The files a runner writes into its run folder besides the table, the scenario, the page
and the provenance: one definition of what ``run`` keeps in its ``Results``,
``load_results`` reads and ``Results.write`` puts back (before the page, which draws
``link_check.csv``'s links and ``timeline.json``'s timelines)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from edgetwin.csv_rows import read_bytes
from edgetwin.links import LINK_CHECK_FILE, CheckedLink, read_link_checks
from edgetwin.run_warnings import WARNINGS_FILE, read_run_warnings
from edgetwin.schema import utf8_text
from edgetwin.sim.crowd.records import TIMELINE_FILE

FAULTS_FILE = "faults.csv"  # an emulator run's faults and bandwidth steps, as played
TRACE_FILE = "trace.json"  # a traced twin run's timeline, a Chrome trace
TRACES_DIR = "traces"  # a traced local run's profiler traces, per rank and configuration
RUN_FILES = (LINK_CHECK_FILE, FAULTS_FILE, TRACE_FILE, TIMELINE_FILE, WARNINGS_FILE)


def read_run_files(folder: Path) -> dict[str, bytes]:
    """Each of ``RUN_FILES`` in ``folder`` and every file under ``TRACES_DIR``, by its path
    in the folder (``traces/<name>``), as bytes; an unreadable one is an InputError."""
    paths = [folder / name for name in RUN_FILES]
    if (folder / TRACES_DIR).is_dir():
        paths += sorted((folder / TRACES_DIR).rglob("*"))
    return {p.relative_to(folder).as_posix(): read_bytes(p) for p in paths if p.is_file()}


def link_checks(folder: Path, files: Mapping[str, bytes]) -> list[CheckedLink]:
    """The checks of ``link_check.csv`` in ``files`` (read from ``folder``); none without."""
    data = files.get(LINK_CHECK_FILE)
    path = folder / LINK_CHECK_FILE
    return [] if data is None else read_link_checks(path, utf8_text(path, data))


def run_warnings(folder: Path, files: Mapping[str, bytes]) -> tuple[str, ...]:
    """The warnings of ``warnings.json`` in ``files`` (read from ``folder``); none without."""
    data = files.get(WARNINGS_FILE)
    return () if data is None else read_run_warnings(folder / WARNINGS_FILE, data)


def write_run_files(folder: Path, files: Mapping[str, bytes]) -> None:
    """``files`` (``read_run_files``'s) into ``folder``."""
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

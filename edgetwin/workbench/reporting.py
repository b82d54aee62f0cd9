"""A run's report written again from its folder (``edgetwin report`` is a thin layer
over ``report``), with its figures as static files if asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from edgetwin.comparison import check_reference
from edgetwin.errors import InputError
from edgetwin.reports import write_report
from edgetwin.reports.static import (
    STATIC_FORMATS,
    browser_path,
    check_figures_folder,
    write_static_figures,
)
from edgetwin.results import read_results, results_file
from edgetwin.workbench.arguments import choice_argument, path_argument

StaticFormat = Literal["svg", "pdf", "png"]


@dataclass(frozen=True)
class Report:
    """What ``report`` wrote: the page and the static figures (none unless asked)."""

    page: Path
    figures: tuple[Path, ...] = ()


def report(folder: str | Path, *, static: StaticFormat | None = None) -> Report:
    """Write ``folder/report.html`` again from the run's files (``results.csv`` or
    ``results.parquet``, and
    ``reference.csv`` and ``scenario.resolved.yaml`` when there), the bytes ``run`` wrote;
    with ``static``, also every figure as ``folder/figures/<name>.<static>`` (headless
    Chromium draws them)."""
    run_dir = path_argument(folder, "folder")
    if static is not None:
        choice_argument(static, "static", STATIC_FORMATS)
    results = results_file(run_dir)
    if not read_results(results):
        raise InputError(results, None, "no rows: no run to report")
    reference = run_dir / "reference.csv"
    if reference.exists():
        check_reference(reference, reference, None)
    if static is not None:  # before the page is written
        check_figures_folder(run_dir)
        browser_path()
    page = write_report(run_dir)
    if static is None:
        return Report(page)
    return Report(page, tuple(write_static_figures(run_dir, static)))

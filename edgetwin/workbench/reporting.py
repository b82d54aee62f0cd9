"""A run's report, or a plan's answer and page, written again from its folder (``edgetwin
report`` is a thin layer over ``report``), with its figures as static files if asked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from edgetwin.errors import InputError
from edgetwin.output_folder import why_not_written
from edgetwin.plan.folder import ANSWER_FILE, answer_table, is_plan_folder, swept_question
from edgetwin.plan.journal import PARTIAL
from edgetwin.reports.adaptive import EVALUATION_PAGE
from edgetwin.reports.affinity import AFFINITY_PAGE
from edgetwin.reports.html import COMPARISON_PAGE, read_run, run_figures, write_run_page
from edgetwin.reports.plan import PLAN_REPORT, plan_figures, write_plan_report
from edgetwin.reports.static import (
    STATIC_FORMATS,
    FigureWidth,
    StaticFormat,
    check_figures_folder,
    export_ready,
    write_static_figures,
)
from edgetwin.reports.validation import VALIDATION_PAGE
from edgetwin.result_cells import read_results
from edgetwin.run_warnings import read_warnings_file
from edgetwin.table_files import RESULTS_CSV, results_file
from edgetwin.workbench.arguments import (
    STATIC_OPTION,
    choice_argument,
    path_argument,
    width_argument,
)
from edgetwin.workbench.run_context import read_run_context

# the pages ``report`` does not redraw (their folders keep no table to draw them from),
# and the command that writes each, with ``--static`` for its figures as files
PAGE_COMMANDS = {
    EVALUATION_PAGE: "evaluate",
    AFFINITY_PAGE: "evaluate-affinity",
    VALIDATION_PAGE: "validate",
    COMPARISON_PAGE: "compare",
}


def other_command_page(folder: Path) -> tuple[str, str] | None:
    """The page and the command that wrote ``folder`` when it is one of those (its page
    there, no results table beside it): ``("validation.html", "validate")``; else None,
    also where the folder cannot be looked up (a name too long: reading it says so)."""
    try:
        for name, command in PAGE_COMMANDS.items():
            if (folder / name).is_file() and not (folder / RESULTS_CSV).is_file():
                return name, command
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class Report:
    """What ``report`` wrote: the page, the static figures (none unless asked), for a
    plan's folder its answer, and every warning the page shows on top (what the run or plan
    warned about, a link short of its rate, a RAM line whose profile is gone), which
    ``edgetwin report`` prints."""

    page: Path
    figures: tuple[Path, ...] = ()
    answer: Path | None = None
    warnings: tuple[str, ...] = ()


def report(
    folder: str | Path, *, static: StaticFormat | None = None, width: str | None = None
) -> Report:
    """Write ``folder/report.html`` again from the run's files (``results.csv`` or
    ``results.parquet``, and
    ``reference.csv`` and ``scenario.resolved.yaml`` when there), the bytes ``run`` wrote;
    with ``static``, also every figure as ``folder/figures/<name>.<static>`` (headless
    Chromium draws them), ``width`` wide (``3.5in``, ``7in``, ``88mm``, ``1000px``; the
    default 1000 px: ``static.figure_width``).

    A plan's folder is answered again from its ``results.csv`` and the question it swept
    (``question.resolved.yaml``): ``answer.json`` and ``plan.html``, the bytes ``plan``
    wrote from the same table (an edited table is answered as edited)."""
    run_dir = path_argument(folder, "folder")
    if static is not None:
        choice_argument(static, "static", STATIC_FORMATS)
    drawn_at = width_argument(width, static)
    try:
        plan, unfinished = is_plan_folder(run_dir), (run_dir / PARTIAL).is_dir()
    except OSError as exc:  # a name too long, say
        raise InputError(run_dir, None, f"cannot be read: {exc.strerror}") from None
    if plan:
        return _report_plan(run_dir, static, drawn_at)
    if unfinished:
        problem = (
            "a plan's unfinished sweep: run the same edgetwin plan command (or "
            "edgetwin.run_plan call) to finish it"
        )
        raise InputError(run_dir, None, problem)
    other = other_command_page(run_dir)
    if other is not None:
        problem = (
            f"holds {other[0]}, which edgetwin {other[1]} writes (report redraws runs and "
            f"plans): run it again with {STATIC_OPTION} for its figures as files"
        )
        raise InputError(run_dir, None, problem)
    results = results_file(run_dir)
    rows = read_results(results)
    if not rows:
        raise InputError(results, None, "no rows: no run to report")
    context = read_run_context(run_dir)  # the files load_results reads, refused alike
    data = read_run(run_dir, rows=rows, scenario=context.scenario)  # each file read once
    if static is not None:  # before the page is written
        check_figures_folder(run_dir)
        export_ready()
    with _writing_into(run_dir):
        page = write_run_page(run_dir, data)
        drawn = (
            ()
            if static is None
            else write_static_figures(run_dir, static, run_figures(data), drawn_at)
        )
    return Report(page, tuple(drawn), warnings=tuple(data.warnings))


def _report_plan(plan_dir: Path, static: StaticFormat | None, width: FigureWidth) -> Report:
    """A plan's ``answer.json`` and ``plan.html`` from its table, and its static figures."""
    loaded = swept_question(plan_dir)
    warnings = read_warnings_file(plan_dir)  # the plan's, kept: before anything is written
    if static is not None:  # before the page is written
        check_figures_folder(plan_dir)
        export_ready()
    with _writing_into(plan_dir):
        result = answer_table(loaded, plan_dir, write_plan_report, warnings)
        figures = (
            ()
            if static is None
            else write_static_figures(plan_dir, static, plan_figures(result), width)
        )
    return Report(plan_dir / PLAN_REPORT, tuple(figures), plan_dir / ANSWER_FILE, warnings)


@contextmanager
def _writing_into(folder: Path) -> Iterator[None]:
    """An OSError while the page is written into ``folder`` (a read-only one, a full disk)
    as an InputError naming the folder, as a command's ``out`` that cannot be created is."""
    try:
        yield
    except OSError as exc:
        raise InputError(
            folder, None, f"cannot write into it: {why_not_written(folder, exc)}"
        ) from None

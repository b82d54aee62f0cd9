"""What-if questions answered by sweeps (``edgetwin plan`` is a thin layer over
``run_plan``; ``edgetwin.plan`` is the package of the questions): the sweep runs in
``out`` itself, journaled, so that a stopped plan resumes."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from edgetwin.atomic import remove_whole
from edgetwin.errors import InputError, option_named, shown
from edgetwin.output_folder import check_out_folder, output_kind
from edgetwin.plan.executors import (
    SCHEDULER,
    DaskExecutor,
    Executor,
    PoolExecutor,
    SerialExecutor,
)
from edgetwin.plan.journal import PARTIAL, ROWS_FILE, JournalBusy, journal_held
from edgetwin.plan.question_file import load_question
from edgetwin.plan.run import PlanOutcome
from edgetwin.plan.run import run_plan as sweep_and_answer
from edgetwin.progress import Progress, no_progress
from edgetwin.provenance import files_read, recording_reads, write_provenance
from edgetwin.reports.plan import plan_figures, write_plan_report
from edgetwin.reports.static import StaticFormat
from edgetwin.workbench.arguments import (
    flag_argument,
    overrides_argument,
    path_argument,
    progress_argument,
    recorded_command,
    static_argument,
    whole_number,
    width_argument,
)
from edgetwin.workbench.output import output_folder
from edgetwin.workbench.static_figures import static_export

WORKERS = option_named("--workers", "workers=")  # how an error names the pool's size


def run_plan(
    question: str | Path,
    *,
    out: str | Path,
    overrides: Sequence[str] = (),
    workers: int | None = None,
    scheduler: str | Any | None = None,
    force: bool = False,
    static: StaticFormat | None = None,
    width: str | None = None,
    progress: Progress | None = no_progress,
    command: Sequence[str] | None = None,
) -> PlanOutcome:
    """Answer a what-if question file (``*.plan.yaml``) by its sweep: the rows, the answer
    (``answer.json``), how many configurations ran now and how many were resumed.

    ``out`` gets ``results.csv``, ``answer.json``, ``plan.html``, ``question.resolved.yaml``,
    ``scenario.resolved.yaml`` and ``provenance.json``;
    the sweep is journaled there, so a stopped plan run again resumes. A non-empty ``out``
    that holds no unfinished sweep only with ``force`` (a fresh sweep, replacing it whole).
    ``workers``: local processes (default: the CPU count; 1 runs in this process);
    ``scheduler``: a Dask scheduler's address (or a ``distributed.Client``) instead (not
    with ``workers``). With ``static`` (``"svg"``, ``"pdf"``, ``"png"``), the page's
    figures too, as ``out/figures/<name>.<static>``, ``width`` wide (a failed export:
    ``out`` without them, then a FiguresNotDrawn). ``overrides`` are ``--set``-style items on the
    question; ``progress`` and ``command`` as for ``run``.
    """
    question_path = path_argument(question, "question")
    out_dir = path_argument(out, "out")
    items = tuple(overrides_argument(overrides))
    force = flag_argument(force, "force")
    call = recorded_command(command, "edgetwin.run_plan", str(question_path), *items)
    shows = progress_argument(progress)
    static = static_argument(static, out_dir)
    drawn_at = width_argument(width, static)
    with recording_reads() as reads:
        loaded = load_question(question_path, items)
        executor = executor_for(workers, scheduler)
        with (
            static_export(out_dir, static, drawn_at) as export,
            plan_folder(out_dir, force) as folder,
        ):

            def finish(outcome: PlanOutcome) -> None:  # before the journal goes
                export.result = outcome
                export.draw(folder, lambda: plan_figures(outcome.answer))
                write_provenance(folder, command=call, seed=loaded.scenario.seed, inputs=reads)

            outcome = sweep_and_answer(loaded, folder, executor, write_plan_report, shows, finish)
    return outcome


def executor_for(workers: int | None, scheduler: str | Any | None) -> Executor:
    """Dask if a scheduler is named, else a process pool (one worker: this process)."""
    if workers is not None:
        count = whole_number(workers)
        if count is None:
            raise InputError(None, WORKERS, f"a number of processes, not {shown(workers)}")
        workers = count
    if scheduler is not None:
        if workers is not None:  # it was ignored: the cluster's workers run the sweep
            problem = f"sizes a local pool; with {SCHEDULER} the cluster's workers run the sweep"
            raise InputError(None, WORKERS, problem)
        return DaskExecutor(scheduler)
    count = workers if workers is not None else os.cpu_count() or 1
    if count < 1:
        raise InputError(None, WORKERS, "must be at least 1")
    return SerialExecutor() if count == 1 else PoolExecutor(count)


PLAN_MARKERS = (PARTIAL,)  # an unfinished sweep's folder is an edgetwin output too
PlanWrite = Literal["resume", "in_place", "staged"]


def check_plan_out(out: Path, force: bool) -> PlanWrite:
    """How ``plan_folder(out, force)`` writes ``out``, or an InputError if it may not:
    ``resume`` an unfinished sweep (without ``force``), ``in_place`` into a new or empty
    ``out`` (checked as ``check_out_folder``), or ``staged`` beside it (``force``)."""
    found = output_kind(out)  # first: a name too long is an InputError, not an OSError
    if not force and found == "folder" and (out / PARTIAL).is_dir():
        return "resume"
    in_place = found is None or not force
    check_out_folder(out, force, files_read(), in_place=in_place, also_ours=PLAN_MARKERS)
    return "in_place" if in_place else "staged"


@contextmanager
def plan_folder(out: Path, force: bool) -> Iterator[Path]:
    """Where the sweep runs: ``out`` itself when it is new, empty or holds an unfinished
    sweep's journal (resumed); with ``force``, a folder staged beside that replaces ``out``
    whole at the end (a fresh sweep). Any other non-empty ``out`` is refused. A new ``out``
    whose sweep stops before it finishes a configuration is removed (nothing to resume)."""
    write = check_plan_out(out, force)
    if write == "resume":
        yield out
        return
    if write == "in_place":
        new = not out.exists()
        try:
            yield out
        except JournalBusy:  # the folder is another plan's now
            raise
        except BaseException:
            if new and not _finished_any(out):  # nothing to resume: leave no folder
                with suppress(OSError):
                    remove_whole(out)  # a second stop meanwhile: no folder half-removed
            raise
        return
    with journal_held(out), output_folder(out, force, also_ours=PLAN_MARKERS) as staging:
        yield staging  # no other plan writes out meanwhile


def interrupted_note(out: Path) -> str:
    """What a stopped plan tells its user it left: the finished configurations of the
    journal in ``out``, if any (a forced sweep is staged elsewhere and keeps none)."""
    if not _finished_any(out):
        return ""
    return f" (finished configurations are kept in {out / PARTIAL} for a rerun)"


def _finished_any(out: Path) -> bool:
    """Whether the sweep in ``out`` journaled a finished configuration."""
    rows = out / PARTIAL / ROWS_FILE
    return rows.is_file() and rows.stat().st_size > 0

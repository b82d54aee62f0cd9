"""``edgetwin plan QUESTION.yaml --out DIR [--workers N] [--scheduler tcp://...]``."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edgetwin.atomic import check_out_folder
from edgetwin.cli import inputs
from edgetwin.cli.progress import progress
from edgetwin.errors import InputError, counted
from edgetwin.plan.answers import describe
from edgetwin.plan.executors import DaskExecutor, Executor, PoolExecutor, SerialExecutor
from edgetwin.plan.journal import PARTIAL, ROWS_FILE, JournalBusy, journal_held
from edgetwin.plan.questions import load_question
from edgetwin.plan.run import run_plan
from edgetwin.plan.sweep import payload_for
from edgetwin.provenance import files_read, write_provenance
from edgetwin.reports.plan import write_plan_report
from edgetwin.workbench.output import output_folder


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of the ``plan`` subcommand."""
    parser.add_argument("question", type=Path, help="question file (YAML), e.g. *.plan.yaml")
    inputs.add_out_argument(parser, "output folder (resumable)")
    parser.add_argument(
        "--workers", type=int, default=None, help="local worker processes (default: CPU count)"
    )
    parser.add_argument("--scheduler", help="a Dask scheduler, e.g. tcp://host:8786")
    inputs.add_set_argument(
        parser, "override a question field, e.g. --set question.target_p95_ms=150"
    )
    inputs.add_quiet_argument(parser)
    inputs.add_check_argument(parser)
    inputs.add_force_argument(parser)


def executor_for(workers: int | None, scheduler: str | None) -> Executor:
    """Dask if a scheduler is named, else a process pool (one worker: this process)."""
    if scheduler is not None:
        if workers is not None:  # it was ignored: the cluster's workers run the sweep
            problem = "sizes a local pool; with --scheduler the cluster's workers run the sweep"
            raise InputError(None, "--workers", problem)
        return DaskExecutor(scheduler)
    count = workers if workers is not None else os.cpu_count() or 1
    if count < 1:
        raise InputError(None, "--workers", "must be at least 1")
    return SerialExecutor() if count == 1 else PoolExecutor(count)


@contextmanager
def plan_folder(out: Path, force: bool) -> Iterator[Path]:
    """Where the sweep runs: ``out`` itself when it is new, empty or holds an unfinished
    sweep's journal (resumed); with ``force``, a folder staged beside that replaces ``out``
    whole at the end (a fresh sweep). Any other non-empty ``out`` is refused. A new ``out``
    whose sweep stops before it finishes a configuration is removed (nothing to resume)."""
    if not force and (out / PARTIAL).is_dir():
        yield out
        return
    in_place = not out.exists() or not force
    check_out_folder(out, force, files_read(), in_place=in_place)
    if in_place:
        new = not out.exists()
        try:
            yield out
        except JournalBusy:  # the folder is another plan's now
            raise
        except BaseException:
            if new and not _finished_any(out):  # nothing to resume: leave no folder
                shutil.rmtree(out, ignore_errors=True)
            raise
        return
    with journal_held(out), output_folder(out, force) as staging:  # no plan writes out now
        yield staging


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


def plan_command(args: argparse.Namespace) -> int:
    """Handler of ``edgetwin plan``."""
    loaded = load_question(args.question, tuple(args.set))
    if args.check:
        return inputs.report_checked(args.question)
    executor = executor_for(args.workers, args.scheduler)
    total = payload_for(loaded).units()
    seed = loaded.scenario.seed
    with (
        plan_folder(args.out, args.force) as folder,
        progress(f"plan {loaded.question.name}", total, args.quiet) as advance,
    ):
        outcome = run_plan(loaded, folder, executor, write_plan_report, advance)
        write_provenance(folder, command=args.command, seed=seed, inputs=args.reads)
    for warning in outcome.warnings:
        print(f"edgetwin: warning: {warning}")
    for line in describe(outcome.answer):
        print(line)
    print(
        f"{counted(outcome.configurations, 'sweep unit')} ({outcome.ran_now} run now, "
        f"{outcome.configurations - outcome.ran_now} resumed) -> "
        f"{args.out}/answer.json, plan.html, results.csv"
    )
    return 0

"""``edgetwin plan QUESTION.yaml --out DIR [--workers N] [--scheduler tcp://...]``."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from edgetwin.cli import inputs
from edgetwin.cli.command import Command
from edgetwin.cli.console import print_warnings, result_printed, written
from edgetwin.cli.inputs import given_path
from edgetwin.cli.progress import progress_bar
from edgetwin.number_text import counted, exact_text
from edgetwin.plan.question_file import load_question
from edgetwin.plan.run import PlanOutcome, start_warnings
from edgetwin.workbench.planning import check_plan_out, run_plan


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of the ``plan`` subcommand."""
    parser.add_argument("question", type=given_path, help="question file (YAML), e.g. *.plan.yaml")
    inputs.add_out_argument(parser, "output folder; the same command again resumes its sweep")
    parser.add_argument(
        "--workers", type=int, default=None, help="local worker processes (default: CPU count)"
    )
    parser.add_argument(
        "--scheduler",
        help="a Dask scheduler, e.g. tcp://host:8786, instead of --workers (default: none, "
        "a local process pool)",
    )
    inputs.add_set_argument(
        parser, "override a question field, e.g. --set question.target_p95_ms=150"
    )
    inputs.add_quiet_argument(parser)
    inputs.add_output_options(parser)


def plan_command(args: argparse.Namespace) -> int:
    """Handler of ``edgetwin plan``."""
    if args.check:  # warns as the plan would start
        print_warnings(start_warnings(load_question(args.question, tuple(args.set))))
        if args.out is not None:
            check_plan_out(args.out, args.force)
        return inputs.report_checked(args.question, args.out)
    planned = partial(
        run_plan,
        args.question,
        out=args.out,
        overrides=args.set,
        workers=args.workers,
        scheduler=args.scheduler,
        force=args.force,
        static=args.static,
        width=args.width,
        progress=progress_bar(args.quiet),
        command=args.command,
    )
    return result_printed(planned, partial(_print_plan, out=args.out))


def _print_plan(outcome: PlanOutcome, out: Path) -> None:
    """A plan's warnings, its answer's lines, then what it ran and where it went."""
    print_warnings(outcome.warnings)
    for line in outcome.describe():
        print(line)
    print(
        f"{counted(outcome.configurations, 'sweep unit')} ({exact_text(outcome.ran_now)} run "
        f"now, {exact_text(outcome.configurations - outcome.ran_now)} resumed) -> {written(out)}"
    )


PLAN = Command(
    "plan",
    "answer a what-if question (QUESTION.yaml) with a sweep in the twin",
    "edgetwin plan scenarios/plan_fleet.plan.yaml --out out/plan_fleet",
    add_plan_arguments,
    plan_command,
)

"""``edgetwin run``, ``compare`` and ``report``: a scenario's runs into a folder, two
folders' rows side by side, and a folder's pages written again from its table."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from edgetwin.cli.command import Command
from edgetwin.cli.console import print_described, print_warnings, result_printed, written
from edgetwin.cli.inputs import (
    add_force_argument,
    add_out_argument,
    add_output_options,
    add_quiet_argument,
    add_set_argument,
    add_static_argument,
    checked_out,
    given_path,
    report_checked,
)
from edgetwin.cli.progress import progress_bar
from edgetwin.configuration import crowd_runs
from edgetwin.links import within_tolerance
from edgetwin.number_text import counted
from edgetwin.run_failures import failed_summary
from edgetwin.scenario import RUN_MODES
from edgetwin.workbench import reporting, running
from edgetwin.workbench.comparing import compare
from edgetwin.workbench.results import FORMATS, Results


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin run``."""
    parser.add_argument(
        "scenario", type=given_path, help="scenario file (YAML), e.g. scenarios/*.yaml"
    )
    add_out_argument(parser)
    parser.add_argument("--seed", type=int, help="override the scenario's seed")
    add_set_argument(parser, "override a scenario field, e.g. --set network.latency_ms=2")
    parser.add_argument(
        "--mode",
        choices=RUN_MODES,
        help="run in this mode instead of the scenario's mode: (default: the scenario's, twin "
        "where it has none)",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="also write the runs' timelines: trace.json (Chrome trace) for a twin run, "
        "timeline.json (the crowd twin's event records) for a crowd run in the twin, "
        "traces/ (a PyTorch profiler Chrome trace per rank and configuration) for a "
        "local ViT run; an emulator run writes none, and a local decoder or crowd run "
        "refuses it",
    )
    add_quiet_argument(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="csv",
        help="results.csv, results.parquet or both (default: csv)",
    )
    add_output_options(parser)


def run_command(args: argparse.Namespace) -> int:
    """``edgetwin.run`` with the command line's options, a progress bar and a summary."""
    if args.check:
        checked = running.check(
            args.scenario, mode=args.mode, seed=args.seed, overrides=args.set, trace=args.trace
        )
        print_warnings(checked)
        return report_checked(args.scenario, checked_out(args))
    ran = partial(
        running.run,
        args.scenario,
        mode=args.mode,
        seed=args.seed,
        overrides=args.set,
        out=args.out,
        force=args.force,
        command=args.command,
        trace=args.trace,
        format=args.format,
        static=args.static,
        width=args.width,
        progress=progress_bar(args.quiet),
    )
    return result_printed(ran, partial(_print_run, out=args.out))


def _print_run(results: Results, out: Path) -> None:
    """A run's warnings, then its summary line: what ran, what failed, where it went."""
    rows = results.rows
    print_warnings(results.warnings)
    short = sum(
        r.link_error_pct is not None and not within_tolerance(r.link_error_pct) for r in rows
    )
    on_short_links = f", {short} on links short of their rate" if short else ""
    ran = _what_ran(results)
    print(f"{ran} ({failed_summary(rows)}{on_short_links}) -> {written(out)}")


def _what_ran(results: Results) -> str:
    """A device scenario's rows are its runs ("6 runs"); a crowd scenario's are its jobs,
    several to a run in the twin ("20 jobs in 1 run")."""
    scenario = results.scenario
    if scenario is None or scenario.crowd is None:
        return counted(len(results.rows), "run")
    return f"{counted(len(results.rows), 'job')} in {counted(len(crowd_runs(scenario)), 'run')}"


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin compare``."""
    parser.add_argument("predicted", type=given_path, help="run folder taken as the prediction")
    parser.add_argument(
        "measured",
        type=given_path,
        help="run folder (or a results table, .csv or .parquet) taken as the measurement",
    )
    parser.add_argument("--out", type=given_path, help="also write DIR/comparison.html and .csv")
    add_static_argument(parser)
    add_force_argument(parser)


def compare_command(args: argparse.Namespace) -> int:
    """Join two runs on the configuration; error of the first relative to the second."""
    compared = partial(
        compare,
        args.predicted,
        args.measured,
        out=args.out,
        force=args.force,
        static=args.static,
        width=args.width,
        command=args.command,
    )
    return result_printed(compared, print_described)


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin report``."""
    parser.add_argument(
        "dir", type=given_path, help="a run's or a plan's output folder (results.csv or .parquet)"
    )
    add_static_argument(parser, "DIR")


def report_command(args: argparse.Namespace) -> int:
    written = reporting.report(args.dir, static=args.static, width=args.width)
    print_warnings(written.warnings)
    answered = f"{written.answer} and " if written.answer is not None else ""
    print(f"wrote {answered}{written.page}")
    if args.static:
        print(f"wrote {counted(len(written.figures), 'figure')} to {args.dir}/figures")
    return 0


# its loading step checks the scenario's kind (the API's too)
RUN = Command(
    "run",
    "run a scenario and write results.csv, report.html and scenario.resolved.yaml",
    "edgetwin run scenarios/prism_jetson.yaml --out out/twin",
    add_run_arguments,
    run_command,
)
COMPARE = Command(
    "compare",
    "one run's results vs another's (e.g. twin vs emulator), point by point",
    "edgetwin compare out/twin out/emu --out out/twin_vs_emu",
    add_compare_arguments,
    compare_command,
)
REPORT = Command(
    "report",
    "(re)write DIR/report.html from DIR/results.csv (or results.parquet); a plan's "
    "DIR/answer.json and plan.html from its results.csv",
    "edgetwin report out/prism_jetson --static svg",
    add_report_arguments,
    report_command,
)

"""Command line: ``edgetwin run | report | calibrate | calibrate-machine | validate``,
``evaluate``, ``evaluate-affinity``, ``plan``, ``compare``, ``init`` and ``emu-cleanup``.

Bad input exits with status 2 and one message naming the file and field;
nothing half-written is left in the output folder. ``--help`` is ``_DESCRIPTION`` and
each subcommand's help and example (plain text).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from edgetwin.atomic import check_out_folder
from edgetwin.calibration.fit_check import (
    TRACES_CAUSE,
    PoorFitWarning,
    busy_machine_cause,
    poor_fit_warning,
)
from edgetwin.calibration.held_out import HOLDOUT_NAMES
from edgetwin.cli.console import notices_on_stderr, print_warnings, written
from edgetwin.cli.init import add_init_arguments, init_command
from edgetwin.cli.inputs import (
    add_check_argument,
    add_force_argument,
    add_out_argument,
    add_quiet_argument,
    add_set_argument,
    add_static_argument,
    report_checked,
    require_out,
)
from edgetwin.cli.plan import add_plan_arguments, plan_command
from edgetwin.cli.progress import progress, progress_bar
from edgetwin.configuration import crowd_runs
from edgetwin.errors import (
    INTERRUPTED_EXIT,
    InputError,
    RunFailed,
    counted,
    raise_if_stop_asked,
    shown_text,
    sigterm_interrupts,
)
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.affinity import AFFINITY_MODES, load_affinity_settings
from edgetwin.evaluate.measured import SkippedCell
from edgetwin.links import within_tolerance
from edgetwin.profile import DeviceProfile
from edgetwin.provenance import edgetwin_version, files_read, recording_reads, write_provenance
from edgetwin.run_folders import LOCAL, remove_leftovers
from edgetwin.scenario import RUN_MODES
from edgetwin.this_machine import available_cores, load_average_1min
from edgetwin.workbench import evaluating, reporting, running, validating
from edgetwin.workbench.calibrating import calibrate
from edgetwin.workbench.comparing import compare
from edgetwin.workbench.inputs import load_run_inputs
from edgetwin.workbench.output import output_folder as _output_folder
from edgetwin.workbench.planning import interrupted_note
from edgetwin.workbench.results import FORMATS, Results

_DESCRIPTION = """\
A digital twin and an emulator for splitting Transformers across edge devices.
Every command reads one file (a scenario, an evaluation, a plan question or a
calibration spec) and writes an output folder. Start from a template with
edgetwin init scenario, then edgetwin run scenario.yaml --out out/first.
Bad input exits with status 2 and one line naming the file and the field."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # what parse_args refuses, with a hint at the likely cause
        command = _subcommand(parser, args.subcommand)
        command.error(f"unrecognized arguments: {' '.join(extra)}{_hint(extra, command)}")
    require_out(_subcommand(parser, args.subcommand), args)
    args.command = ["edgetwin", *(sys.argv[1:] if argv is None else argv)]
    try:
        # every file the command reads: its SHA-256; SIGTERM cleans up as Ctrl-C does
        with sigterm_interrupts(), recording_reads() as args.reads, notices_on_stderr():
            code = int(args.handler(args))
            raise_if_stop_asked()  # an interrupt a finalizer swallowed still stops the command
            return code
    except InputError as exc:
        print(f"edgetwin: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except RunFailed as exc:
        print(f"edgetwin: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        raise  # the reader of the output left: the entry point ends quietly
    except OSError as exc:  # a full disk, a read-only folder: what the system said, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"edgetwin: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        kept = interrupted_note(args.out) if args.subcommand == "plan" else ""
        print(f"edgetwin: interrupted; no output was published{kept}", file=sys.stderr)
        return INTERRUPTED_EXIT


ARGPARSE_MESSAGE_CHARS = 300  # a usage error's message, its middle cut beyond


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, as bad input's are (it printed the usage first)."""

    def error(self, message: str) -> NoReturn:
        """One line, however long the value argparse quotes (a --seed of 5,000 digits)."""
        shown_message = shown_text(message, ARGPARSE_MESSAGE_CHARS)
        self.exit(2, f"{self.prog}: error: {shown_message} (see {self.prog} --help)\n")


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command: argparse.ArgumentParser = action.choices[name]
    return command


def _hint(extra: list[str], command: argparse.ArgumentParser) -> str:
    """A misspelt option (--sett: did you mean --set?), or left-over YAML words: the shell
    split a --set value at its spaces (it used to be the hint for any extra word)."""
    names = [o[2:] for a in command._actions for o in a.option_strings if o.startswith("--")]
    for word in extra:
        if word.startswith("--"):  # the names without their dashes, which every one shares
            close = difflib.get_close_matches(word[2:].split("=")[0], names, n=1)
            if close:
                return f"; did you mean --{close[0]}?"
    if any(c in word for word in extra if not word.startswith("-") for c in "{[:,"):
        return '; a --set value with spaces needs quotes: --set "sweeps=[{batch: [1, 8]}]"'
    return ""


def _command(
    commands: argparse._SubParsersAction[_Parser],
    name: str,
    help_text: str,
    example: str,
) -> argparse.ArgumentParser:
    """A subcommand with plain-text help and one example."""
    return commands.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="edgetwin",
        description=_DESCRIPTION,
        epilog="example:\n  edgetwin run scenarios/prism_jetson.yaml --out out/prism_jetson",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"edgetwin {edgetwin_version()}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND", dest="subcommand")

    run = _command(
        commands,
        "run",
        "run a scenario and write results.csv, report.html and scenario.resolved.yaml",
        "edgetwin run scenarios/prism_jetson.yaml --out out/twin",
    )
    run.add_argument("scenario", type=Path, help="scenario file (YAML), e.g. scenarios/*.yaml")
    add_out_argument(run)
    run.add_argument("--seed", type=int, help="override the scenario's seed")
    add_set_argument(run, "override a scenario field, e.g. --set network.latency_ms=2")
    run.add_argument(
        "--mode", choices=RUN_MODES, help="override the scenario's mode (default: its mode:, twin)"
    )
    run.add_argument(
        "--trace",
        action="store_true",
        help="also write the runs' timelines: trace.json (Chrome trace) for a twin run, "
        "timeline.json (the crowd twin's event records) for a crowd run in the twin, "
        "traces/ (a PyTorch profiler Chrome trace per rank and configuration) for a "
        "local ViT run; an emulator run writes none, and a local decoder or crowd run "
        "refuses it",
    )
    add_quiet_argument(run)
    run.add_argument(
        "--format",
        choices=FORMATS,
        default="csv",
        help="results.csv, results.parquet or both (default: csv)",
    )
    add_check_argument(run)
    add_static_argument(run)
    add_force_argument(run)
    run.set_defaults(handler=_run)  # its loading step checks the kind (the API's too)

    compare = _command(
        commands,
        "compare",
        "one run's results vs another's (e.g. twin vs emulator), point by point",
        "edgetwin compare out/twin out/emu --out out/twin_vs_emu",
    )
    compare.add_argument("predicted", type=Path, help="run folder taken as the prediction")
    compare.add_argument(
        "measured", type=Path, help="run folder (or a results table, .csv) taken as the measurement"
    )
    compare.add_argument("--out", type=Path, help="also write DIR/comparison.html and .csv")
    add_static_argument(compare)
    add_force_argument(compare)
    compare.set_defaults(handler=_compare)

    report = _command(
        commands,
        "report",
        "(re)write DIR/report.html from DIR/results.csv (or results.parquet); a plan's "
        "DIR/answer.json and plan.html from its results.csv",
        "edgetwin report out/prism_jetson --static svg",
    )
    report.add_argument(
        "dir", type=Path, help="a run's or a plan's output folder (results.csv or .parquet)"
    )
    add_static_argument(report, "DIR")
    report.set_defaults(handler=_report)

    calibrate = _command(
        commands,
        "calibrate",
        "fit a device profile to a measured table or traces",
        "edgetwin calibrate out/machine/spec.yaml --out out/machine/refit.yaml",
    )
    calibrate.add_argument("spec", type=Path, help="calibration spec (YAML)")
    add_out_argument(calibrate, "profile file to write")
    calibrate.set_defaults(handler=_calibrate)

    machine = _command(
        commands,
        "calibrate-machine",
        "profile this machine: run the real code paths, write traces, fit a profile",
        "edgetwin calibrate-machine --quick --out out/machine",
    )
    add_out_argument(machine)
    machine.add_argument("--quick", action="store_true", help="a small model, a few seconds")
    machine.add_argument(
        "--no-decoder",
        action="store_true",
        help="skip the decoder generations (no memory bandwidth in the profile)",
    )
    machine.add_argument(
        "--emu",
        type=Path,
        metavar="RUN_DIR",
        help="fit from this 'edgetwin run --mode emu' folder instead of measuring",
    )
    add_force_argument(machine)
    add_quiet_argument(machine)
    machine.set_defaults(handler=_calibrate_machine)

    evaluate = _command(
        commands,
        "evaluate",
        "profile a performance map, score the deployment policies at held-out conditions",
        "edgetwin evaluate scenarios/adaptive_prism.eval.yaml --out out/adaptive",
    )
    evaluate.add_argument("spec", type=Path, help="evaluation file (YAML), e.g. *.eval.yaml")
    add_out_argument(evaluate)
    add_set_argument(evaluate, "override an evaluation field, e.g. --set objective=energy")
    add_check_argument(evaluate)
    add_static_argument(evaluate)
    add_force_argument(evaluate)
    add_quiet_argument(evaluate)
    evaluate.set_defaults(handler=_evaluate)

    plan = _command(
        commands,
        "plan",
        "answer a what-if question (QUESTION.yaml) with a sweep in the twin",
        "edgetwin plan scenarios/plan_fleet.plan.yaml --out out/plan_fleet",
    )
    add_plan_arguments(plan)
    plan.set_defaults(handler=plan_command)

    affinity = _command(
        commands,
        "evaluate-affinity",
        "crowd schedulers vs the offline optimum on small instances",
        "edgetwin evaluate-affinity scenarios/affinity_small.eval.yaml --out out/affinity",
    )
    affinity.add_argument("spec", type=Path, help="evaluation file, e.g. *.eval.yaml")
    add_out_argument(affinity)
    affinity.add_argument(
        "--mode",
        choices=AFFINITY_MODES,
        help="overrides the file's mode (default: its mode:, twin; emu: Mininet, root)",
    )
    add_quiet_argument(affinity)
    add_check_argument(affinity)
    add_static_argument(affinity)
    add_force_argument(affinity)
    affinity.set_defaults(handler=_evaluate_affinity)

    validate = _command(
        commands,
        "validate",
        "held-out errors: refit without each batch (or bandwidth, or prompt) and predict it",
        "edgetwin validate out/machine/spec.yaml --out out/validation",
    )
    validate.add_argument("spec", type=Path, help="calibration spec (YAML)")
    add_out_argument(validate)
    validate.add_argument(
        "--by",
        choices=list(HOLDOUT_NAMES),
        default="batch",
        help="what to leave out in turn (default: batch; bandwidth: traces with a shaped link; "
        "prompt: decoder prompt lengths)",
    )
    add_static_argument(validate)
    add_force_argument(validate)
    validate.set_defaults(handler=_validate)

    init = _command(
        commands,
        "init",
        "write a commented file to start from: a scenario, an evaluation or a plan question",
        "edgetwin init scenario my_scenario.yaml",
    )
    add_init_arguments(init)
    init.set_defaults(handler=init_command)

    cleanup = _command(
        commands,
        "emu-cleanup",
        "remove what a crashed emulator run (processes, links, folders) or local run left",
        "sudo edgetwin emu-cleanup",
    )
    cleanup.set_defaults(handler=_emu_cleanup)
    return parser


def _checked_out(args: argparse.Namespace) -> Path | None:
    """``--out``, checked as the command checks it before it runs (for ``--check``)."""
    out: Path | None = args.out
    if out is not None:
        check_out_folder(out, args.force, files_read())
    return out


def _run(args: argparse.Namespace) -> int:
    """``edgetwin.run`` with the command line's options, a progress bar and a summary."""
    if args.check:
        items = running.run_overrides(args.set, args.seed, args.mode)
        running.check_mode(load_run_inputs(args.scenario, items), trace=args.trace)
        return report_checked(args.scenario, _checked_out(args))
    results = running.run(
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
        progress=progress_bar(args.quiet),
    )
    rows = results.rows
    print_warnings(results.warnings)
    failed = sum(not row.ok for row in rows)
    short = sum(
        r.link_error_pct is not None and not within_tolerance(r.link_error_pct) for r in rows
    )
    on_short_links = f", {short} on links short of their rate" if short else ""
    ran = _what_ran(results)
    print(f"{ran} ({failed} failed{on_short_links}) -> {written(args.out)}")
    return 0


def _what_ran(results: Results) -> str:
    """A device scenario's rows are its runs ("6 runs"); a crowd scenario's are its jobs,
    several to a run in the twin ("20 jobs in 1 run")."""
    scenario = results.scenario
    if scenario is None or scenario.crowd is None:
        return f"{len(results.rows)} runs"
    return f"{counted(len(results.rows), 'job')} in {counted(len(crowd_runs(scenario)), 'run')}"


def _emu_cleanup(_args: argparse.Namespace) -> int:
    """Remove what a killed local run left (its temporary folders), then what a crashed
    emulator run left: its processes, interfaces, bridge, cgroups, temporary folders and the
    staging folder beside its ``--out`` (root's, so as root only)."""
    from edgetwin.emu.mininet.lock import LOCK_PATH, emulator_busy
    from edgetwin.emu.mininet.mn import ROOT_NEEDED, is_root
    from edgetwin.emu.mininet.net import cleanup_leftovers

    local = tuple(remove_leftovers(LOCAL))  # needs no root
    root = is_root()
    owner = emulator_busy() if root else None
    if not root or owner is not None:  # said here: the emulator's part is not done
        print(f"emu-cleanup: {counted(len(local), 'folder')} of killed local runs removed")
    if not root:  # the lock file, the interfaces and the processes are root's
        raise InputError("emu-cleanup", None, f"needs {ROOT_NEEDED}")
    if owner is not None:
        problem = f"an emulator run ({owner}) is live and cleans up after itself; not touching it"
        raise InputError(LOCK_PATH, None, problem)
    left = cleanup_leftovers()
    print(f"emu-cleanup: {replace(left, folders=(*left.folders, *local))}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Join two runs on the configuration; error of the first relative to the second."""
    comparison = compare(
        args.predicted,
        args.measured,
        out=args.out,
        force=args.force,
        static=args.static,
        command=args.command,
    )
    print_warnings(comparison.warnings)
    for metric, median in comparison.median_abs_error_pct.items():
        count = sum(p["metric"] == metric and p["error_pct"] is not None for p in comparison.points)
        print(f"{metric}: median |error| {median:.1f} % over {counted(count, 'point')}")
    no_prediction, no_measurement = comparison.unmatched_keys, comparison.unmeasured_keys
    if no_prediction or no_measurement:
        print(
            f"not compared: {len(no_prediction)} measured rows with no prediction, "
            f"{len(no_measurement)} predicted rows with no measured row"
        )
    return 0


def _report(args: argparse.Namespace) -> int:
    written = reporting.report(args.dir, static=args.static)
    answered = f"{written.answer} and " if written.answer is not None else ""
    print(f"wrote {answered}{written.page}")
    if args.static:
        print(f"wrote {counted(len(written.figures), 'figure')} to {args.dir}/figures")
    return 0


# The calibration commands import the fitting code (and SciPy) when they run, not at start-up:
# every other command starts without it.
def _calibrate(args: argparse.Namespace) -> int:
    command = f"edgetwin calibrate {args.spec} --out {args.out}"
    with warnings.catch_warnings():  # the API's PoorFitWarning: said as the command's, below
        warnings.simplefilter("ignore", PoorFitWarning)
        fitted = calibrate(args.spec, out=args.out, command=command)
    if isinstance(fitted, list):
        from edgetwin.calibration.fit_android import android_profile_path

        print("wrote " + ", ".join(str(android_profile_path(args.out, p)) for p in fitted))
        return 0
    medians = fitted.fit.get("median_abs_error_pct", {})
    print(
        f"wrote {args.out}; median |error| %: " + ", ".join(f"{k} {v}" for k, v in medians.items())
    )
    _warn_of_a_poor_fit(fitted)
    return 0


def _warn_of_a_poor_fit(profile: DeviceProfile, cause: str | None = None) -> None:
    """A warning when a fitted section misses its own data (``fit_check``); ``cause``:
    why, when known (default: the measurements disagree)."""
    warning = poor_fit_warning(profile, cause or TRACES_CAUSE)
    print_warnings([warning] if warning is not None else [])


def _calibrate_machine(args: argparse.Namespace) -> int:
    """Traces, spec and profile of this machine in ``--out`` (torch is imported only here);
    with ``--emu``, spec and profile fitted from an emulator run."""
    if args.emu is not None:
        return _calibrate_machine_from_emu(args)
    from edgetwin.calibration.machine import (
        FULL,
        QUICK,
        calibrate_machine,
        calibration_steps,
        summary,
    )

    flags = [flag for flag in ("quick", "no_decoder") if getattr(args, flag)]
    command = " ".join(
        [
            f"edgetwin calibrate-machine --out {args.out}",
            *("--" + f.replace("_", "-") for f in flags),
        ]
    )
    plan = QUICK if args.quick else FULL
    if args.no_decoder:
        plan = replace(plan, decoder=None)
    load_average, cores = load_average_1min(), available_cores()  # before it adds its own
    with (
        _output_folder(args.out, args.force) as staging,
        progress("calibrate-machine", calibration_steps(plan), args.quiet) as advance,
    ):
        profile = calibrate_machine(staging, plan, command, advance)
        write_provenance(staging, command=args.command, seed=None, inputs={})
    print(
        f"wrote {args.out}/profile.yaml (median |error|: {summary(profile)}), "
        f"traces in {args.out}/traces, spec in {args.out}/spec.yaml"
    )
    _warn_of_a_poor_fit(profile, busy_machine_cause(load_average, cores))
    return 0


def _calibrate_machine_from_emu(args: argparse.Namespace) -> int:
    from edgetwin.calibration.fit_emu import calibrate_machine_from_emu

    _refuse_measuring_flags_with_emu(args)
    command = f"edgetwin calibrate-machine --emu {args.emu} --out {args.out}"
    # the run folder it fits is read in the folder, after out is checked: named here
    with _output_folder(args.out, args.force, inputs=(str(args.emu),)) as staging:
        profile = calibrate_machine_from_emu(args.emu, staging, command, published_as=args.out)
        write_provenance(staging, command=args.command, seed=None, inputs=args.reads)
    medians = profile.fit["median_abs_error_pct"]
    print(
        f"wrote {args.out}/profile.yaml (in-sample median |error| %: "
        + ", ".join(f"{k} {v}" for k, v in medians.items())
        + f"), spec in {args.out}/spec.yaml"
    )
    _warn_of_a_poor_fit(profile)
    return 0


def _refuse_measuring_flags_with_emu(args: argparse.Namespace) -> None:
    """``--quick`` and ``--no-decoder`` choose what this machine measures; ``--emu`` measures
    nothing (it fits an emulator run, which times no decoder), so with it they are refused
    rather than ignored."""
    for flag in ("quick", "no_decoder"):
        if getattr(args, flag):
            option = "--" + flag.replace("_", "-")
            raise InputError(
                args.emu,
                option,
                f"{option} chooses what this machine measures; --emu measures nothing "
                "(it fits the emulator run's rows): leave one of them out",
            )


def _evaluate(args: argparse.Namespace) -> int:
    """Map, held-out twin runs and policy scores of an evaluation file."""
    if args.check:
        load_eval_inputs(args.spec, tuple(args.set))
        return report_checked(args.spec, _checked_out(args))
    result = evaluating.evaluate_adaptive(
        args.spec,
        overrides=args.set,
        out=args.out,
        force=args.force,
        static=args.static,
        progress=progress_bar(args.quiet),
        command=args.command,
    )
    print_warnings(result.warnings)
    print(f"ground truth: {result.truth_source}, {counted(len(result.conditions), 'condition')}")
    if result.infeasible:
        infeasible = counted(len(result.infeasible), "condition")
        print(f"not scored: {infeasible} where every candidate fails")
    for cell in result.skipped:
        print(skipped_line(cell))
    for name, score in result.scores.items():
        print(
            f"{name}: accuracy {score.decision_accuracy:.3f}, regret mean "
            f"{score.mean_regret_pct:.2f} % max {score.max_regret_pct:.2f} %"
        )
    print(f"-> {written(args.out)}")
    return 0


def skipped_line(cell: SkippedCell) -> str:
    """A measured cell the evaluation could not score, and which candidates it lacks (a
    decoder's cell: its prompt and output tokens)."""
    tokens = f"{cell.tokens} tokens"
    if cell.output_tokens is not None:
        tokens = f"{cell.tokens} prompt and {cell.output_tokens} output tokens"
    where = f"batch {cell.batch}, {cell.bandwidth_mbps:g} Mbps, {tokens}"
    return f"skipped {where}: not measured for {', '.join(cell.missing)}"


def _evaluate_affinity(args: argparse.Namespace) -> int:
    """Schedulers in the crowd twin or the emulator vs the offline optimum, per instance."""
    if args.check:
        load_affinity_settings(args.spec, args.mode, machine=False)
        return report_checked(args.spec, _checked_out(args))
    result = evaluating.evaluate_affinity(
        args.spec,
        mode=args.mode,
        out=args.out,
        force=args.force,
        static=args.static,
        progress=progress_bar(args.quiet),
        command=args.command,
    )
    for instance in result.instances:
        optimum_s = instance.optimum.schedule.makespan_ms / 1e3
        proved = "" if instance.optimum.proved else " (not proved within node_limit)"
        regrets = ", ".join(f"{n} {s.regret_pct:.1f} %" for n, s in instance.schedulers.items())
        print(
            f"{instance.name} ({instance.strategy}): optimum makespan {optimum_s:.4g} s{proved}; "
            f"regret (makespan over the optimum's): {regrets}"
        )
    print(f"-> {written(args.out)}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from edgetwin.calibration.held_out import coverage_text

    summary = validating.validate(
        args.spec,
        by=args.by,
        out=args.out,
        force=args.force,
        static=args.static,
        command=args.command,
    ).summary
    for metric, stats in summary.items():
        print(
            f"{metric}: {stats['points']:.0f} held-out points, MAPE {stats['mape_pct']:.1f} %, "
            f"median {stats['median_abs_error_pct']:.1f} %, max {stats['max_abs_error_pct']:.1f} %"
            f"{coverage_text(stats)}"
        )
    print(f"-> {written(args.out)}")
    return 0

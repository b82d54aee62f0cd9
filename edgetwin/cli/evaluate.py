"""``edgetwin evaluate`` and ``evaluate-affinity``: the deployment policies scored at
held-out conditions, and the crowd schedulers against the offline optimum."""

from __future__ import annotations

import argparse
from functools import partial

from edgetwin.cli.command import Command
from edgetwin.cli.console import print_described, result_printed
from edgetwin.cli.inputs import (
    add_out_argument,
    add_output_options,
    add_quiet_argument,
    add_set_argument,
    checked_out,
    given_path,
    report_checked,
)
from edgetwin.cli.progress import progress_bar
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.affinity import AFFINITY_MODES, load_affinity_settings
from edgetwin.workbench import evaluating


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin evaluate``."""
    parser.add_argument("spec", type=given_path, help="evaluation file (YAML), e.g. *.eval.yaml")
    add_out_argument(parser)
    add_set_argument(parser, "override an evaluation field, e.g. --set objective=energy")
    add_output_options(parser)
    add_quiet_argument(parser)


def evaluate_command(args: argparse.Namespace) -> int:
    """Map, held-out twin runs and policy scores of an evaluation file."""
    if args.check:
        load_eval_inputs(args.spec, tuple(args.set))
        return report_checked(args.spec, checked_out(args))
    evaluated = partial(
        evaluating.evaluate_adaptive,
        args.spec,
        overrides=args.set,
        out=args.out,
        force=args.force,
        static=args.static,
        width=args.width,
        progress=progress_bar(args.quiet),
        command=args.command,
    )
    return result_printed(evaluated, partial(print_described, out=args.out))


def add_affinity_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin evaluate-affinity``."""
    parser.add_argument("spec", type=given_path, help="evaluation file, e.g. *.eval.yaml")
    add_out_argument(parser)
    parser.add_argument(
        "--mode",
        choices=AFFINITY_MODES,
        help="run in this mode instead of the file's mode: (default: the file's, twin where "
        "it has none; emu needs Mininet and root)",
    )
    add_set_argument(parser, "override an evaluation field, e.g. --set repetitions=2")
    add_quiet_argument(parser)
    add_output_options(parser)


def affinity_command(args: argparse.Namespace) -> int:
    """Schedulers in the crowd twin or the emulator vs the offline optimum, per instance."""
    if args.check:
        load_affinity_settings(args.spec, args.mode, machine=False, overrides=args.set)
        return report_checked(args.spec, checked_out(args))
    evaluated = partial(
        evaluating.evaluate_affinity,
        args.spec,
        overrides=args.set,
        mode=args.mode,
        out=args.out,
        force=args.force,
        static=args.static,
        width=args.width,
        progress=progress_bar(args.quiet),
        command=args.command,
    )
    return result_printed(evaluated, partial(print_described, out=args.out))


EVALUATE = Command(
    "evaluate",
    "profile a performance map, score the deployment policies at held-out conditions",
    "edgetwin evaluate scenarios/adaptive_prism.eval.yaml --out out/adaptive",
    add_evaluate_arguments,
    evaluate_command,
)
EVALUATE_AFFINITY = Command(
    "evaluate-affinity",
    "crowd schedulers vs the offline optimum on small instances",
    "edgetwin evaluate-affinity scenarios/affinity_small.eval.yaml --out out/affinity",
    add_affinity_arguments,
    affinity_command,
)

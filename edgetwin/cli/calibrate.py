"""``edgetwin calibrate``, ``calibrate-machine`` and ``validate``: a profile fitted to
measurements, this machine's traces and profile, and a profile's held-out errors.

The calibration commands import the fitting code (and SciPy) when they run, not at start-up:
every other command starts without it."""

from __future__ import annotations

import argparse
import warnings
from functools import partial

from edgetwin.calibration.fit_check import FIT_WARNINGS, fit_warnings, median_errors
from edgetwin.calibration.held_out import HOLDOUT_NAMES
from edgetwin.cli.command import Command
from edgetwin.cli.console import (
    print_described,
    print_warnings,
    result_printed,
    warnings_recorded,
)
from edgetwin.cli.inputs import (
    add_force_argument,
    add_out_argument,
    add_quiet_argument,
    add_static_argument,
    given_path,
)
from edgetwin.cli.progress import progress, progress_bar
from edgetwin.workbench import validating
from edgetwin.workbench.calibrating import calibrate
from edgetwin.workbench.machine import profile_machine


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin calibrate``."""
    parser.add_argument("spec", type=given_path, help="calibration spec (YAML)")
    add_out_argument(
        parser,
        "profile file to write (an Android spec's: the folder its phone classes' files go into)",
    )
    add_force_argument(
        parser,
        "replace an existing profile file (an Android spec's: its phone classes' files in "
        "--out); without it, one is refused",
    )
    add_quiet_argument(parser)


def calibrate_command(args: argparse.Namespace) -> int:
    command = f"edgetwin calibrate {args.spec} --out {args.out}"
    with warnings.catch_warnings():  # the API's warnings of the fit: the command's, below
        for category in FIT_WARNINGS:
            warnings.simplefilter("ignore", category)
        fitted = calibrate(
            args.spec,
            out=args.out,
            force=args.force,
            command=command,
            progress=progress_bar(args.quiet),
        )
    if isinstance(fitted, list):
        from edgetwin.calibration.fit_android import android_profile_path

        print("wrote " + ", ".join(str(android_profile_path(args.out, p)) for p in fitted))
        return 0
    print(f"wrote {args.out}; {median_errors(fitted)}")
    print_warnings(line for _category, line in fit_warnings(fitted))
    return 0


def add_machine_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin calibrate-machine``."""
    add_out_argument(parser)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a 4-block ViT of width 192 and a small decoder (about 18 s): a smoke test, "
        "too small for its profile to predict models of real size",
    )
    parser.add_argument(
        "--no-decoder",
        action="store_true",
        help="skip the decoder generations (no memory bandwidth in the profile)",
    )
    parser.add_argument(
        "--emu",
        type=given_path,
        metavar="RUN_DIR",
        help="fit from this 'edgetwin run --mode emu' folder instead of measuring",
    )
    add_force_argument(parser)
    add_quiet_argument(parser)


def machine_command(args: argparse.Namespace) -> int:
    """Traces, spec and profile of this machine in ``--out`` (torch is imported only then);
    with ``--emu``, spec and profile fitted from an emulator run: ``calibrate_machine``."""
    with warnings_recorded(FIT_WARNINGS) as fit_warned:  # printed below; others pass on
        profile = profile_machine(
            args.out,
            quick=args.quick,
            decoder=not args.no_decoder,
            emu=args.emu,
            force=args.force,
            steps=lambda label, total: progress(label, total, args.quiet),
            command=args.command,
        )
    traces = "" if args.emu is not None else f"traces in {args.out}/traces, "
    print(
        f"wrote {args.out}/profile.yaml ({median_errors(profile)}), {traces}"
        f"spec in {args.out}/spec.yaml"
    )
    print_warnings(fit_warned)
    return 0


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``edgetwin validate``."""
    parser.add_argument("spec", type=given_path, help="calibration spec (YAML)")
    add_out_argument(parser)
    parser.add_argument(
        "--by",
        choices=list(HOLDOUT_NAMES),
        default="batch",
        help="what to leave out in turn (default: batch; bandwidth: traces with a shaped link; "
        "prompt: decoder prompt lengths)",
    )
    add_static_argument(parser)
    add_force_argument(parser)
    add_quiet_argument(parser)


def validate_command(args: argparse.Namespace) -> int:
    validated = partial(
        validating.validate,
        args.spec,
        by=args.by,
        out=args.out,
        force=args.force,
        static=args.static,
        width=args.width,
        progress=progress_bar(args.quiet),
        command=args.command,
    )
    return result_printed(validated, partial(print_described, out=args.out))


CALIBRATE = Command(
    "calibrate",
    "fit a device profile to a measured table or traces",
    "edgetwin calibrate out/machine/spec.yaml --out out/machine/refit.yaml",
    add_calibrate_arguments,
    calibrate_command,
)
CALIBRATE_MACHINE = Command(
    "calibrate-machine",
    "profile this machine: run the real code paths, write traces, fit a profile",
    "edgetwin calibrate-machine --quick --out out/machine",
    add_machine_arguments,
    machine_command,
)
VALIDATE = Command(
    "validate",
    "held-out errors: refit without each batch (or bandwidth, or prompt) and predict it",
    "edgetwin validate out/machine/spec.yaml --out out/validation",
    add_validate_arguments,
    validate_command,
)

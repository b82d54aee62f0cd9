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
from collections.abc import Sequence

from edgetwin.cli.calibrate import CALIBRATE, CALIBRATE_MACHINE, VALIDATE
from edgetwin.cli.cleanup import EMU_CLEANUP
from edgetwin.cli.console import notices_on_stderr
from edgetwin.cli.evaluate import EVALUATE, EVALUATE_AFFINITY
from edgetwin.cli.init import INIT
from edgetwin.cli.inputs import require_out
from edgetwin.cli.plan import PLAN
from edgetwin.cli.run import COMPARE, REPORT, RUN
from edgetwin.errors import (
    InputError,
    OneLineParser,
    RunFailed,
    ignore_stops,
    raise_if_stop_asked,
    sigterm_interrupts,
    stopped_exit_code,
)
from edgetwin.progress import write_line
from edgetwin.provenance import edgetwin_version, recording_reads
from edgetwin.workbench.planning import interrupted_note

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
        # SIGTERM cleans up as Ctrl-C does, and a second stop meanwhile cuts that short
        # (saying so) up to the command's last line; every file it reads: its SHA-256
        with sigterm_interrupts(command=True):
            try:
                with recording_reads() as args.reads, notices_on_stderr():
                    code = int(args.handler(args))
                    raise_if_stop_asked()  # an interrupt a finalizer swallowed still stops it
                    return code
            except KeyboardInterrupt:
                ignore_stops()  # cleaned up: another stop would cut this line short
                kept = interrupted_note(args.out) if args.subcommand == "plan" else ""
                write_line(sys.stderr, f"edgetwin: interrupted; no output was published{kept}")
                return stopped_exit_code()
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


COMMANDS = (
    RUN,
    COMPARE,
    REPORT,
    CALIBRATE,
    CALIBRATE_MACHINE,
    EVALUATE,
    PLAN,
    EVALUATE_AFFINITY,
    VALIDATE,
    INIT,
    EMU_CLEANUP,
)


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="edgetwin",
        description=_DESCRIPTION,
        epilog="example:\n  edgetwin run scenarios/prism_jetson.yaml --out out/prism_jetson",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"edgetwin {edgetwin_version()}")
    subparsers = parser.add_subparsers(required=True, metavar="COMMAND", dest="subcommand")
    for command in COMMANDS:  # each with plain-text help and one example
        subparser = subparsers.add_parser(
            command.name,
            help=command.help,
            description=command.help[0].upper() + command.help[1:] + ".",
            epilog=f"example:\n  {command.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(subparser)
        subparser.set_defaults(handler=command.handler)
    return parser

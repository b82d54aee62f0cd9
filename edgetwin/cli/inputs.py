"""The arguments the commands share: ``--out``, ``--set``, ``--quiet``, ``--force`` and
``--check`` on the commands that read an input file: load and check it with every file it
names, then stop (``edgetwin.workbench.inputs`` is the loading step of ``run``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from edgetwin.output_folder import check_out_folder
from edgetwin.provenance import files_read
from edgetwin.reports.static import STATIC_FORMATS


def given_path(text: str) -> Path:
    """A path argument; an empty one is refused: ``Path("")`` is the current folder, so
    ``--out "$OUT"`` with OUT unset was said to be 'the current folder or holds it', and an
    empty scenario 'a folder, not a file', naming '.'."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (a shell variable not set?)")
    return Path(text)


def add_out_argument(parser: argparse.ArgumentParser, help_text: str = "output folder") -> None:
    """``--out`` (required; optional with ``--check``, added after it): where the command
    writes."""
    parser.add_argument("--out", type=given_path, required=True, help=help_text)


def add_set_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE`` (repeatable): override a field of the input file; ``--set ~KEY``
    removes it."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"{help_text}; --set ~KEY removes a key (its default applies)",
    )


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bar."""
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar on a terminal, no progress lines on stderr",
    )


def add_check_argument(parser: argparse.ArgumentParser) -> None:
    """``--check``: load and check the input file (and ``--out``, where given), then stop.
    It writes nothing, so ``--out`` is needed only without it (``require_out``)."""
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the file, every file it names and what its mode can run, then stop "
        "(nothing runs or is written; root, Mininet and free memory are checked when it runs)",
    )
    out = next(a for a in parser._actions if "--out" in a.option_strings)
    out.required = False
    out.help = f"{out.help} (required, except with --check)"


def require_out(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, as argparse refuses a missing required option, a command that would write
    without ``--out`` (one with ``--check`` takes it optionally)."""
    if getattr(args, "check", None) is False and args.out is None:
        parser.error("the following arguments are required: --out")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--check``, ``--static`` and ``--force``, the options a command that reads an input
    file and writes a folder takes last (after ``--out``, which ``--check`` makes optional)."""
    add_check_argument(parser)
    add_static_argument(parser)
    add_force_argument(parser)


def add_force_argument(
    parser: argparse.ArgumentParser,
    help_text: str = "replace a non-empty --out folder whole (without it, one is refused)",
) -> None:
    """``--force``: replace a non-empty ``--out`` folder whole (else it is refused; a
    command that writes files says what it replaces in ``help_text``)."""
    parser.add_argument("--force", action="store_true", help=help_text)


def add_static_argument(parser: argparse.ArgumentParser, folder: str = "--out") -> None:
    """``--static FORMAT``: also write each figure of the command's page as a file, and
    ``--width``: how wide."""
    parser.add_argument(
        "--static",
        choices=STATIC_FORMATS,
        help=f"also write each figure of the page as {folder}/figures/<name>.FORMAT "
        "(headless Chromium draws them)",
    )
    parser.add_argument(
        "--width",
        metavar="WIDTH",
        help="draw the --static figures this wide, with its unit: 3.5in or 7in (a paper's "
        "column or page), 88mm, 1000px (the default); a length draws a PNG at 300 dpi",
    )


def report_checked(path: Path, out: Path | None) -> int:
    """What ``--check`` prints once ``path`` and the files it names loaded and ``out`` (if
    given) was checked as the command checks it; exit status 0."""
    with_out = "" if out is None else " and --out"
    print(f"{path}: ok (checked with every file it names{with_out}; nothing run)")
    return 0


def checked_out(args: argparse.Namespace) -> Path | None:
    """``--out``, checked as the command checks it before it runs (for ``--check``)."""
    out: Path | None = args.out
    if out is not None:
        check_out_folder(out, args.force, files_read())
    return out

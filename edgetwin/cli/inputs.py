"""``--check`` on the commands that read an input file: load and check it with every file
it names, then stop (``edgetwin.workbench.inputs`` is the loading step of ``run``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_check_argument(parser: argparse.ArgumentParser) -> None:
    """``--check``: load and check the input file, then stop."""
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the file and every file it names, then stop (nothing runs or is written)",
    )


def report_checked(path: Path) -> int:
    """What ``--check`` prints once ``path`` and the files it names loaded; exit status 0."""
    print(f"{path}: ok (checked with every file it names; nothing run)")
    return 0

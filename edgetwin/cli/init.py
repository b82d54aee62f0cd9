"""``edgetwin init KIND [PATH]``: a commented file to start from (a scenario, an evaluation,
a plan question or a decoder's), one that loads and runs as written."""

from __future__ import annotations

import argparse

from edgetwin.cli.command import Command
from edgetwin.workbench.starting import KINDS, TEMPLATES, init


def add_init_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of the ``init`` subcommand."""
    parser.add_argument(
        "kind",
        choices=KINDS,
        help="what to write: scenario, eval (an evaluation, beside a scenario.yaml), "
        "plan (a plan question, beside a scenario.yaml) or plan-llm (a decoder's plan "
        "question: the scenario.yaml beside it turned into a decoder LLM)",
    )
    parser.add_argument(
        "path",
        nargs="?",
        help="file to write, or a folder (an existing one, or a name ending in /) to write "
        "the default name into (default: "
        + ", ".join(f"{name} for {kind}" for kind, (_, name) in TEMPLATES.items())
        + ", in this folder)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def init_command(args: argparse.Namespace) -> int:
    """``edgetwin.init``, saying what it wrote."""
    print(f"wrote {init(args.kind, args.path, force=args.force)}")
    return 0


INIT = Command(
    "init",
    "write a commented file to start from: a scenario, an evaluation, a plan question "
    "or a decoder's plan question",
    "edgetwin init scenario my_scenario.yaml",
    add_init_arguments,
    init_command,
)

"""``edgetwin init KIND [PATH]``: a commented file to start from (a scenario, an evaluation
or a plan question), one that loads and runs as written."""

from __future__ import annotations

import argparse
import os
from importlib.resources import files
from pathlib import Path

from edgetwin.atomic import output_kind, why_not_written, write_text_atomic
from edgetwin.cli.command import Command
from edgetwin.errors import InputError

# kind -> (template in cli/templates, default file name)
TEMPLATES: dict[str, tuple[str, str]] = {
    "scenario": ("scenario.yaml", "scenario.yaml"),
    "eval": ("eval.yaml", "evaluation.eval.yaml"),
    "plan": ("plan.yaml", "question.plan.yaml"),
}


def template_text(kind: str) -> str:
    """The commented template of ``kind``."""
    return files("edgetwin.cli").joinpath("templates", TEMPLATES[kind][0]).read_text()


def add_init_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of the ``init`` subcommand."""
    parser.add_argument(
        "kind",
        choices=list(TEMPLATES),
        help="what to write: scenario, eval (an evaluation, beside a scenario.yaml) "
        "or plan (a plan question, beside a scenario.yaml)",
    )
    parser.add_argument(
        "path",
        nargs="?",
        help="file to write, or a folder (an existing one, or a name ending in /) to write "
        "the default name into (default: scenario.yaml, evaluation.eval.yaml or "
        "question.plan.yaml in this folder)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def init_command(args: argparse.Namespace) -> int:
    """Handler of ``edgetwin init``."""
    default_name = TEMPLATES[args.kind][1]
    given: str | None = args.path
    path = Path(default_name) if given is None else Path(given)
    if given is not None and (given.endswith(os.sep) or output_kind(path) == "folder"):
        path = path / default_name
    found = output_kind(path)
    if found is not None and not args.force:
        raise InputError(path, None, "exists; pass --force to overwrite it")
    if found not in (None, "file"):
        raise InputError(path, None, "exists and is not a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, template_text(args.kind))
    except OSError as exc:
        raise InputError(path, None, f"cannot write: {why_not_written(path, exc)}") from None
    print(f"wrote {path}")
    return 0


INIT = Command(
    "init",
    "write a commented file to start from: a scenario, an evaluation or a plan question",
    "edgetwin init scenario my_scenario.yaml",
    add_init_arguments,
    init_command,
)

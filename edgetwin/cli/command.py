"""What a subcommand is: its name, one-line help, an example, the arguments it adds and
the handler that runs it (``edgetwin.cli.COMMANDS`` lists them in ``--help``'s order)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand of ``edgetwin``; ``handler`` returns the exit status."""

    name: str
    help: str
    example: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]

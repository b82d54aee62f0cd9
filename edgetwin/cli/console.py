"""What a command says besides its result: warnings, on stderr (stdout carries the result
lines a script may read)."""

from __future__ import annotations

import sys
from collections.abc import Iterable


def print_warnings(warnings: Iterable[str]) -> None:
    """Each warning as a line ``edgetwin: warning: ...`` on stderr."""
    for warning in warnings:
        print(f"edgetwin: warning: {warning}", file=sys.stderr)

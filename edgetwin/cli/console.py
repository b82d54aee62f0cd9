"""What a command says besides its result: warnings and the notices edgetwin's modules log,
on stderr (stdout carries the result lines a script may read)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def print_warnings(warnings: Iterable[str]) -> None:
    """Each warning as a line ``edgetwin: warning: ...`` on stderr."""
    for warning in warnings:
        print(f"edgetwin: warning: {warning}", file=sys.stderr)


class _StderrNotices(logging.Handler):
    """A notice the library logs (what a killed command left, removed) as a line on stderr,
    ``edgetwin: removed 2 folders left by killed edgetwin commands in DIR``; stderr is looked
    up for each, so that a progress bar on screen (which stands in for it) shows it above."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"edgetwin: {record.getMessage()}", file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


@contextmanager
def notices_on_stderr() -> Iterator[None]:
    """Within the block, what edgetwin's modules log is printed by ``_StderrNotices`` alone
    (not passed on to the root logger's handlers as well)."""
    logger = logging.getLogger("edgetwin")
    handler, passed_on = _StderrNotices(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = passed_on


def written(out: Path) -> str:
    """``out/`` and every file it holds, the results first: what a command wrote."""
    names = sorted(p.name for p in out.iterdir())
    first = [n for n in names if n.startswith("results.")]
    return f"{out}/: {', '.join(first + [n for n in names if n not in first])}"

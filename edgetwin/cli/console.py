"""What a command says: its result's lines on stdout (which a script may read), and on
stderr its warnings and the notices edgetwin's modules log."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TextIO, TypeVar, cast

from edgetwin.progress import write_line
from edgetwin.workbench.static_figures import FiguresNotDrawn

Result = TypeVar("Result")


def result_printed(call: Callable[[], Result], print_result: Callable[[Result], None]) -> int:
    """Exit status 0 once ``print_result`` printed what ``call`` returned. Where only the
    static figures failed (a FiguresNotDrawn: the folder was published), it prints the
    result the failure carries, then raises it (the command's error, exit 1)."""
    try:
        result = call()
    except FiguresNotDrawn as failed:
        print_result(cast(Result, failed.result))
        raise
    print_result(result)
    return 0


class Described(Protocol):
    """A result that says itself (an evaluation, a validation, a comparison)."""

    @property
    def warnings(self) -> Sequence[str]: ...

    def describe(self) -> list[str]: ...


def print_described(result: Described, out: Path | None = None) -> None:
    """``result``'s warnings on stderr, its lines, then what the command wrote to ``out``."""
    print_warnings(result.warnings)
    for line in result.describe():
        print(line)
    if out is not None:
        print(f"-> {written(out)}")


def print_warnings(warnings: Iterable[str]) -> None:
    """Each warning as a line ``edgetwin: warning: ...`` on stderr."""
    for warning in warnings:
        write_line(sys.stderr, f"edgetwin: warning: {warning}")


@contextmanager
def warnings_recorded(categories: tuple[type[Warning], ...]) -> Iterator[list[str]]:
    """Within the block, each warning of ``categories`` is recorded, every time it is
    raised, and its line yielded for the command to print as its own; any other warning
    (a numpy RuntimeWarning, a pandas FutureWarning) is shown, or raised, as it would be
    without the block, where it was raised."""
    recorded: list[str] = []
    with warnings.catch_warnings():
        for category in categories:
            warnings.simplefilter("always", category)
        show = warnings.showwarning  # the caller's: the default, pytest's, a notebook's

        def record_or_show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, categories):
                recorded.append(str(message))
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = record_or_show
        yield recorded


class _StderrNotices(logging.Handler):
    """A notice the library logs (what a killed command left, removed) as a line on stderr,
    ``edgetwin: removed 2 folders left by killed edgetwin commands in DIR``; stderr is looked
    up for each, so that a progress bar on screen (which stands in for it) shows it above."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            write_line(sys.stderr, f"edgetwin: {record.getMessage()}")
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

"""Progress of a command over a known number of steps: a bar on a terminal, a line per
step on stderr otherwise (a log, a pipe, CI), nothing with ``--quiet``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


@contextmanager
def progress(
    label: str, total: int, quiet: bool, stream: TextIO | None = None
) -> Iterator[Callable[[], None]]:
    """Yields the callback that marks one of ``total`` steps done."""
    out = sys.stderr if stream is None else stream
    if quiet:
        yield lambda: None
    elif out.isatty():
        with _bar(label, total, out) as advance:
            yield advance
    else:
        yield _lines(label, total, out)


def _lines(label: str, total: int, out: TextIO) -> Callable[[], None]:
    done = 0

    def advance() -> None:
        nonlocal done
        done += 1
        print(f"{label}: {done}/{total}", file=out, flush=True)

    return advance


@contextmanager
def _bar(label: str, total: int, out: TextIO) -> Iterator[Callable[[], None]]:
    from rich.console import Console

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True, console=Console(file=out)) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)

"""Progress of a command over a known number of steps: a bar on a terminal, a line per
step on stderr otherwise (a log, a pipe, CI), nothing with ``--quiet``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class Advance(Protocol):
    """Marks one step done; ``done`` (optional) names it, shown after the count."""

    def __call__(self, done: str = "") -> None: ...


@contextmanager
def progress(
    label: str, total: int, quiet: bool, stream: TextIO | None = None
) -> Iterator[Advance]:
    """Yields the callback that marks one of ``total`` steps done."""
    out = sys.stderr if stream is None else stream
    if quiet:
        yield lambda done="": None
    elif out.isatty():
        with _bar(label, total, out) as advance:
            yield advance
    else:
        yield _lines(label, total, out)


def _lines(label: str, total: int, out: TextIO) -> Advance:
    count = 0

    def advance(done: str = "") -> None:
        nonlocal count
        count += 1
        print(f"{label}: {count}/{total}{f' ({done})' if done else ''}", file=out, flush=True)

    return advance


@contextmanager
def _bar(label: str, total: int, out: TextIO) -> Iterator[Advance]:
    from rich.console import Console

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True, console=Console(file=out)) as bar:
        task = bar.add_task(label, total=total)

        def advance(done: str = "") -> None:
            shown = f"{label} (done: {done})" if done else label  # while the next step runs
            bar.update(task, advance=1, description=shown)

        yield advance

"""Progress of a command over a known number of steps: a bar on a terminal, a line per
step on stderr otherwise (a log, a pipe, CI; ``edgetwin.progress.text_progress``'s lines),
nothing with ``--quiet``. A progress opened within a step (an emulator run's link checks)
is a second bar below the first for as long as it lasts, or lines of its own."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from edgetwin.progress import Advance, Steps, text_progress


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
        with text_progress(out, in_place=False)(label, total) as advance:
            yield advance


_LIVE: list[Progress] = []  # the bar on screen: a progress opened within a step joins it


@contextmanager
def _bar(label: str, total: int, out: TextIO) -> Iterator[Advance]:
    if _LIVE:  # a step's own steps (an emulator run's link checks): a line below, for a while
        bar = _LIVE[-1]
        task = bar.add_task(label, total=total)
        try:
            yield _advance(bar, task, label)
        finally:
            bar.remove_task(task)
        return
    from rich.console import Console

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f}", justify="right"),  # 1,200/1,200
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True, console=Console(file=out)) as bar:
        _LIVE.append(bar)
        try:
            yield _advance(bar, bar.add_task(label, total=total), label)
        finally:
            _LIVE.pop()


def _advance(bar: Progress, task: TaskID, label: str) -> Advance:
    def advance(done: str = "") -> None:
        shown = f"{label} (done: {done})" if done else label  # while the next step runs
        bar.update(task, advance=1, description=shown)

    return advance


def progress_bar(quiet: bool) -> Steps:
    """``progress`` as the Python API's ``progress`` argument takes it."""
    return lambda label, total: progress(label, total, quiet)

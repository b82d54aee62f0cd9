"""A command's page's figures as files (``--static``), drawn into its staging folder: an
export that fails does not cost the command its folder, which is published without
``figures/``; the failure is raised after, naming the folder and how to draw them later."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from edgetwin.errors import FORCE_OPTION, RunFailed, option_named
from edgetwin.reports.static import (
    DEFAULT_WIDTH,
    FIGURES_DIR,
    FigureWidth,
    StaticFormat,
    write_static_figures,
)
from edgetwin.workbench.reporting import other_command_page

Figures = Callable[[], Sequence[go.Figure]]  # a page's figures, built only to be drawn


class FiguresNotDrawn(RunFailed):
    """Only the static export failed (the browser failed or ran past its deadline): the
    command's folder, ``folder``, was published without its ``figures/``; ``result`` is
    what the call would have returned (its ``Results``, ``PlanOutcome``, ...)."""

    def __init__(self, folder: Path, problem: str, result: object) -> None:
        self.folder = folder
        self.problem = problem
        self.result = result
        super().__init__(problem)

    def __reduce__(self) -> tuple[type[FiguresNotDrawn], tuple[Path, str, object]]:
        """Pickles with its fields, so that it crosses from a process pool's worker intact
        (an exception pickles its ``args`` alone by default: the problem, not the folder)."""
        return (type(self), (self.folder, self.problem, self.result))


@dataclass
class StaticExport:
    """A command's ``--static`` export into its staging folder (none without ``fmt``), how
    it failed, if it did, and what the command returns (set by it: a failure carries it)."""

    fmt: StaticFormat | None
    width: FigureWidth = DEFAULT_WIDTH
    failure: RunFailed | None = None
    result: object = None

    def draw(self, staging: Path, figures: Figures | None = None) -> None:
        """``figures()`` (``None``: the run report's of ``staging``) as
        ``staging/figures/<name>.<fmt>``; a failed export is kept in ``failure`` and leaves
        no ``figures/`` (it is written whole or not at all)."""
        if self.fmt is None:
            return
        try:
            drawn = None if figures is None else figures()
            write_static_figures(staging, self.fmt, drawn, self.width)
        except RunFailed as exc:
            self.failure = exc


@contextmanager
def static_export(
    out: Path | None, fmt: StaticFormat | None, width: FigureWidth = DEFAULT_WIDTH
) -> Iterator[StaticExport]:
    """The export of a command that writes ``out`` (nothing without ``out``), its figures
    ``width`` wide. Entered
    before the output folder, so that a failed export lets the folder be published,
    without ``figures/``, and is raised after it as a FiguresNotDrawn naming ``out`` and
    carrying the export's ``result``."""
    export = StaticExport(None if out is None else fmt, width)
    yield export
    if export.failure is not None and out is not None and fmt is not None:  # failed: both given
        problem = f"{export.failure}; {_written_without(out, fmt, width.given)}"
        raise FiguresNotDrawn(out, problem, export.result)


def _written_without(out: Path, fmt: StaticFormat, width: str = "") -> str:
    """That ``out`` was written without its figures, and how to draw them (``width`` wide, as
    given; empty: the default): ``edgetwin report`` for a run's or a plan's folder, else the
    command again."""
    written = f"{out} was written without {FIGURES_DIR}/"
    other = other_command_page(out)
    option = f"--static {fmt}" + (f" --width {width}" if width else "")
    argument = f"static={fmt!r}" + (f", width={width!r}" if width else "")
    if other is None:
        redraw = option_named(
            f"edgetwin report {out} {option}", f"edgetwin.report(folder, {argument})"
        )
        return f"{written}: draw them with {redraw}"
    again = option_named(option, argument)
    return (
        f"{written}, and edgetwin report cannot draw them from its {other[0]}: run "
        f"edgetwin {other[1]} again with {FORCE_OPTION} and {again} for them"
    )

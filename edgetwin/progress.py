"""Progress as the Python API takes it: ``progress(label, total)`` returns a context
manager that yields the function called after each of ``total`` steps, with the step's
name if it takes one (``prism cr 9.9 x2, batch 8, 400 Mbps, rep 0``), without if it
takes none. A step may open a progress of its own inside (an emulator run's link
checks), which a bar shows below. ``text_progress`` shows one as text, for a notebook or a
script; the command line's bar (``edgetwin.cli.progress``) writes its lines."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TextIO, cast

from edgetwin.number_text import exact_text


class Advance(Protocol):
    """Marks one step done; ``done`` (optional) names it."""

    def __call__(self, done: str = "") -> None: ...


Step = Callable[[str], None] | Callable[[], None]  # told each step: by name, or not
Progress = Callable[[str, int], AbstractContextManager[Step]]  # as the API takes it
Steps = Callable[[str, int], AbstractContextManager[Advance]]  # as the workflows call it


@contextmanager
def no_progress(_label: str, _total: int) -> Iterator[Advance]:
    """Progress that shows nothing."""
    yield lambda done="": None


def text_progress(stream: TextIO | None = None, *, in_place: bool | None = None) -> Steps:
    """Progress as text on ``stream`` (``None``: stderr when the progress opens): one line
    rewritten in place (``\\r``) and ended when the progress closes, or a line per step.
    ``in_place`` ``None`` rewrites where the stream shows it: a terminal, or a Jupyter
    kernel's output, whose stderr is no terminal (ipykernel's stream)."""

    @contextmanager
    def shown(label: str, total: int) -> Iterator[Advance]:
        out = sys.stderr if stream is None else stream
        rewrite = _rewrites(out) if in_place is None else in_place
        if not rewrite:
            yield _lines(label, total, out)
            return
        line = _LINES.setdefault(id(out), _Line(out))
        try:
            yield line.opened(label, total)
        finally:
            line.closed()
            if not line.texts:
                del _LINES[id(out)]

    return shown


def write_line(out: TextIO, text: str) -> None:
    """``text`` and its newline in one write, flushed: ``print`` writes them in two, and a
    stop (Ctrl-C, SIGTERM) that lands between leaves the line open, so that the command's
    last line (``edgetwin: interrupted; ...``) ends it instead of standing on its own."""
    out.write(f"{text}\n")
    out.flush()


def _step_text(label: str, count: int, total: int, done: str = "") -> str:
    """What a text progress shows after ``count`` of ``total`` steps, the last named ``done``."""
    return f"{label}: {exact_text(count)}/{exact_text(total)}{f' ({done})' if done else ''}"


def _lines(label: str, total: int, out: TextIO) -> Advance:
    count = 0

    def advance(done: str = "") -> None:
        nonlocal count
        count += 1
        write_line(out, _step_text(label, count, total, done))

    return advance


def _rewrites(out: TextIO) -> bool:
    """Whether ``out`` shows a line rewritten in place: a terminal, or a Jupyter kernel's
    stream (ipykernel's OutStream, which the notebook shows with ``\\r`` applied)."""
    return out.isatty() or type(out).__module__.startswith("ipykernel.")


class _Line:
    """A stream's one line of progress: the innermost open progress's text (an emulator
    run's link checks within a run's step), its outer one's again once it closes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.texts: list[str] = []  # each open progress's text, the outermost first
        self.width = 0  # of the text on the line now, which the next one covers

    def opened(self, label: str, total: int) -> Advance:
        self.texts.append(_step_text(label, 0, total))
        self._draw()
        depth, count = len(self.texts), 0

        def advance(done: str = "") -> None:
            nonlocal count
            count += 1
            self.texts[depth - 1] = _step_text(label, count, total, done)
            self._draw()

        return advance

    def closed(self) -> None:
        self.texts.pop()
        if self.texts:
            self._draw()
        else:
            write_line(self.out, "")

    def _draw(self) -> None:
        text = self.texts[-1]
        self.out.write(f"\r{text.ljust(self.width)}")
        self.out.flush()
        self.width = len(text)


_LINES: dict[int, _Line] = {}  # the line of each stream a progress shows on now, by id


def naming(step: Step | None) -> Advance:
    """``step`` as a runner calls it, with each step's name: passed on to a function that
    takes an argument, left out for one that takes none (its signature is read once)."""
    if step is None:
        return lambda done="": None
    if _takes_a_name(step):
        return cast(Advance, step)
    unnamed = cast(Callable[[], None], step)
    return lambda done="": unnamed()


def _takes_a_name(step: Step) -> bool:
    """Whether ``step`` can be called with one argument (False when its signature cannot
    be read, as for some built-ins: then it is called as first documented, without)."""
    try:
        inspect.signature(step).bind("name")
    except (TypeError, ValueError):
        return False
    return True

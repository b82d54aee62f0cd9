"""Progress as the Python API takes it: ``progress(label, total)`` returns a context
manager that yields the function called after each of ``total`` steps, with the step's
name if it takes one (``prism cr 9.9 x2, batch 8, 400 Mbps, rep 0``), without if it
takes none. A step may open a progress of its own inside (an emulator run's link
checks), which a bar shows below."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, cast


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

"""Progress as the Python API takes it: ``progress(label, total)`` returns a context
manager that yields the function called after each of ``total`` steps. A step may open a
progress of its own inside (an emulator run's link checks), which a bar shows below."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

Progress = Callable[[str, int], AbstractContextManager[Callable[[], None]]]


@contextmanager
def no_progress(_label: str, _total: int) -> Iterator[Callable[[], None]]:
    """Progress that shows nothing."""
    yield lambda: None

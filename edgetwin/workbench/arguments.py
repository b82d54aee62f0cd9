"""The Python API's arguments checked as the command line's are: a wrong type or value is
an InputError naming the argument, not a TypeError from deep inside."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, cast

from edgetwin.errors import InputError, option_named, shown
from edgetwin.progress import Advance, Steps, naming, no_progress
from edgetwin.reports.static import (
    DEFAULT_WIDTH,
    STATIC_FORMATS,
    FigureWidth,
    StaticFormat,
    export_ready,
    figure_width,
)

STATIC_OPTION = option_named("--static", "static=")
WIDTH_OPTION = option_named("--width", "width=")


def path_argument(value: Any, name: str) -> Path:
    """``value`` (a ``str`` or ``Path``) as a Path."""
    if isinstance(value, str | Path) and str(value):
        return Path(value)
    raise InputError(None, name, f"a path (str or Path), not {shown(value)}")


def out_argument(value: Any, name: str = "out") -> Path | None:
    """``value``, None (nothing is written) or a folder's path (a ``str`` or ``Path``)."""
    return None if value is None else path_argument(value, name)


def overrides_argument(value: Any, name: str = "overrides") -> list[str]:
    """``value``, a sequence of ``"key.sub=value"`` strings (one string alone is refused:
    iterating it would read each character as an item)."""
    if isinstance(value, str):
        raise InputError(None, name, f"a list of 'key=value' items, not one string {shown(value)}")
    if not isinstance(value, Sequence):
        raise InputError(None, name, f"a list of 'key=value' items, not {shown(value)}")
    for k, item in enumerate(value):
        if not isinstance(item, str):
            raise InputError(None, f"{name}.{k}", f"a 'key=value' string, not {shown(item)}")
    return list(value)


def flag_argument(value: Any, name: str) -> bool:
    """``value``, a ``bool`` (a string such as ``"no"`` is refused: it would read as true)."""
    if not isinstance(value, bool):
        raise InputError(None, name, f"True or False, not {shown(value)}")
    return value


def command_argument(value: Any, name: str = "command") -> list[str] | None:
    """``value``, None or a list of the command's arguments as strings (one string alone is
    refused: it would be recorded one character per argument)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InputError(None, name, f"a list of argument strings, not {shown(value)}")
    for k, item in enumerate(value):
        if not isinstance(item, str):
            raise InputError(None, f"{name}.{k}", f"an argument string, not {shown(item)}")
    return list(value)


def recorded_command(value: Any, *call: str) -> list[str]:
    """What ``provenance.json`` records as the command: ``value`` (the command line, checked
    as ``command_argument``), else ``call``, the API call made."""
    given = command_argument(value)
    return list(call) if given is None else given


def choice_argument(value: Any, name: str, choices: Sequence[str]) -> Any:
    """``value`` if it is one of ``choices``."""
    if value not in choices:
        raise InputError(None, name, f"one of {', '.join(choices)}, not {shown(value)}")
    return value


def static_argument(value: Any, out_dir: Path | None) -> StaticFormat | None:
    """``value``, None or a static figure format, given with an output folder to write the
    figures into (``out/figures``); a Chromium to draw them is looked for now, before the
    work whose figures they are."""
    if value is None:
        return None
    choice_argument(value, "static", STATIC_FORMATS)
    if out_dir is None:
        raise InputError(
            None, STATIC_OPTION, "the figures are written into the output folder: give one"
        )
    export_ready()
    return cast(StaticFormat, value)


def width_argument(width: Any, static: StaticFormat | None) -> FigureWidth:
    """``width`` (a width with its unit, ``"3.5in"``; None: the default) as the static
    figures' width; an InputError naming the option where it is not one, or where no
    figure is drawn (no ``static``)."""
    if width is None:
        return DEFAULT_WIDTH
    if static is None:
        problem = f"sets the width of static figures: give {STATIC_OPTION} too"
        raise InputError(None, WIDTH_OPTION, problem)
    if not isinstance(width, str):
        raise InputError(None, WIDTH_OPTION, f"a width with its unit (3.5in), not {shown(width)}")
    return figure_width(width, WIDTH_OPTION)


def progress_argument(value: Any, name: str = "progress") -> Steps:
    """``value``, a function ``progress(label, total)``, checked as it is called: what it
    returns must be a context manager that yields a function (``None``: show nothing),
    told each step's name if it takes one (``naming``).
    A wrong one is found at its first call, within the run's staging folder, so that
    nothing is left in ``out``."""
    if value is None:
        return no_progress
    if not callable(value) or not _can_be_called(value, "label", 0):
        raise InputError(None, name, f"a function progress(label, total), not {shown(value)}")
    wanted = "a function progress(label, total) returning a context manager that yields"

    @contextmanager
    def checked(label: str, total: int) -> Iterator[Advance]:
        manager = value(label, total)
        if not isinstance(manager, AbstractContextManager):
            raise InputError(None, name, f"{wanted} a function, not one returning {shown(manager)}")
        with manager as advance:
            if not callable(advance):
                raise InputError(None, name, f"{wanted} a function, not {shown(advance)}")
            if not (_can_be_called(advance, "step") or _can_be_called(advance)):
                problem = f"{wanted} a function of the step's name or of nothing"
                raise InputError(None, name, f"{problem}, not {shown(advance)}")
            yield naming(advance)

    return checked


def _can_be_called(function: Callable[..., Any], *arguments: object) -> bool:
    """Whether ``function`` can be called with ``arguments`` (True when its signature
    cannot be read, as for some built-ins)."""
    try:
        inspect.signature(function).bind(*arguments)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def seed_argument(value: Any, name: str = "seed") -> int | None:
    """``value``, None or a whole number (``True`` is refused: it would read as 1); its range
    is the scenario's ``seed``'s, checked with the scenario as ``--seed`` is."""
    if value is None:
        return None
    number = whole_number(value)
    if number is None:
        raise InputError(None, name, f"a whole number, not {shown(value)}")
    return number


def whole_number(value: Any) -> int | None:
    """``value`` as an ``int`` if it is a whole number, numpy's too (``np.arange``'s), else
    None: a ``bool`` is none (it would read as 1 or 0), nor is a float such as ``2.0``."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None

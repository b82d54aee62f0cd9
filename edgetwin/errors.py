"""User-facing errors: bad input is reported as one clear message, exit 2."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import NoReturn

from edgetwin.number_text import counted

SHOWN_VALUE_CHARS = 80  # an echoed value (a path, a bad value) is cut to this many characters
_PATH_CHARS = 160
_FIELD_CHARS = 80
_PROBLEM_CHARS = 300
ARGPARSE_MESSAGE_CHARS = 300  # a usage error's message, its middle cut beyond


def option_named(option: str, argument: str) -> str:
    """How an error or a warning that a Python caller can hit names a command-line option:
    the option, then the argument of the Python API that gives it, ``--workers (workers= in
    Python)``; an option with its value, that value in Python, ``--mode emu (mode='emu' in
    Python)``."""
    return f"{option} ({argument} in Python)"


TRACE_ASKED = option_named("--trace", "trace=True")  # a run's trace option
OUT_OPTION = option_named("--out", "out=")  # a command's output folder (or profile file)
FORCE_OPTION = option_named("--force", "force=True")  # replace a non-empty output whole
MODE_TWIN = option_named("--mode twin", "mode='twin'")  # what real code cannot run, the twin can
MODE_EMU = option_named("--mode emu", "mode='emu'")  # what only the emulator plays


class RunFailed(RuntimeError):
    """A run that started but could not finish (a process died, a deadline passed): exit 1."""

    exit_code = 1


class LaunchError(RunFailed):
    """A process of a run (a rank, the foreman, a worker) did not start or stopped early;
    the others have been stopped and the message shows the end of its log."""


class InputError(Exception):
    """Bad user input: names the file and the field, and says what is wrong (``path``,
    ``None`` for an argument of a call or a command; ``field``; ``problem``).

    The message is one line of at most a few hundred characters: line breaks become
    spaces and each part is cut (with an ellipsis) to a fixed length."""

    exit_code = 2

    def __init__(self, path: Path | str | None, field: str | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.field = field
        self.problem = problem
        super().__init__(self.message)

    def __reduce__(self) -> tuple[type[InputError], tuple[str | None, str | None, str]]:
        """Pickles with its fields, so that it crosses from a pool or Dask worker intact."""
        return (type(self), (self.path, self.field, self.problem))

    @property
    def message(self) -> str:
        """``FILE: field 'FIELD': PROBLEM``; without a file (an argument of a command or a
        call, a Scenario object) the field comes first, and without either the problem."""
        where = [shown_text(self.path, _PATH_CHARS)] if self.path else []
        if self.field:
            where.append(f"field '{shown_text(self.field, _FIELD_CHARS)}'")
        return ": ".join([*where, shown_text(self.problem, _PROBLEM_CHARS)])


def shown_text(text: str, limit: int = SHOWN_VALUE_CHARS) -> str:
    """``text`` on one line, its middle cut to an ellipsis if longer than ``limit``."""
    line = " ".join(text.splitlines())
    if len(line) <= limit:
        return line
    head = (limit - 1) * 2 // 3
    return line[:head] + "…" + line[len(line) - (limit - 1 - head) :]


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, as bad input's are (it printed its usage first):
    the ``edgetwin`` command's, and each real-code process's (a rank, a phone, a foreman)."""

    def error(self, message: str) -> NoReturn:
        """One line, however long the value argparse quotes (a --seed of 5,000 digits)."""
        shown_message = shown_text(message, ARGPARSE_MESSAGE_CHARS)
        self.exit(2, f"{self.prog}: error: {shown_message} (see {self.prog} --help)\n")


def warnings_note(warnings: Sequence[str]) -> str:
    """``"; 2 warnings in .warnings"`` (empty without one): the end of a result's line in a
    notebook, where the command prints each warning on stderr."""
    return f"; {counted(len(warnings), 'warning')} in .warnings" if warnings else ""


def shown(value: object, limit: int = SHOWN_VALUE_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters."""
    return shown_text(repr(value), limit)


class _Stop:
    """Whether a stop (SIGTERM or Ctrl-C) was asked for within ``sigterm_interrupts``, and
    by which signal."""

    asked = False
    signum: int | None = None  # the last stop's, kept after the block for its exit status
    depth = 0  # sigterm_interrupts blocks entered and not yet left
    command = False  # the outermost block is a command's: a second stop says what it does
    said = False  # that second stop's line is out (a third says nothing more)


def stop_name(signum: int) -> str:
    """How a message names a stop's signal: ``Ctrl-C`` (SIGINT), ``SIGTERM``."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def second_stop_note(signum: int) -> str:
    """What a command says when a second stop cuts the first one's clean-up short: what
    that can leave and what removes it (``--out`` is never half-written: it is published
    whole by a rename or not at all, and a plan's journal keeps what it finished)."""
    return (
        f"edgetwin: {stop_name(signum)} again: stopping now, cutting the clean-up short; no "
        "output was published (a plan keeps its finished configurations for a rerun); the "
        "next edgetwin command that writes there removes a staging folder left beside the "
        "output, edgetwin emu-cleanup what a local or emulator run left"
    )


def _say_second_stop(signum: int) -> None:
    """``second_stop_note`` on stderr, from a signal handler: one write of the descriptor
    (the stream may be halfway through a line of the main code's)."""
    with suppress(OSError, ValueError):
        fd = sys.stderr.fileno()
        after_bar = "\n" if os.isatty(fd) else ""  # a progress bar's line, on a terminal
        os.write(fd, f"{after_bar}{second_stop_note(signum)}\n".encode())


def ignore_stops() -> None:
    """Within a command's ``sigterm_interrupts`` block, once it has cleaned up and says it
    stopped: a further stop changes nothing (it raised out of that last line, a traceback);
    the block's end puts the old handlers back."""
    for stop in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(stop) is _interrupt:
            signal.signal(stop, signal.SIG_IGN)


def stop_asked() -> bool:
    """True once SIGTERM or Ctrl-C came within ``sigterm_interrupts``, even if the
    KeyboardInterrupt it raised was lost: a signal handled while a finalizer runs (a
    dropped generator's ``finally``, a ``__del__``) raises there, where Python prints
    "Exception ignored" and carries on."""
    return _Stop.asked


def stopped_exit_code() -> int:
    """The exit status of a command stopped by a signal, as the shell gives it: 128 + the
    signal's number (130 for Ctrl-C, 143 for SIGTERM), that of the last stop asked for
    within the outermost ``sigterm_interrupts`` block, left or not (130 without one: a
    KeyboardInterrupt that no handler of ours raised is Ctrl-C's)."""
    return 128 + (signal.SIGINT if _Stop.signum is None else _Stop.signum)


def stopped() -> bool:
    """Whether the last command (the outermost ``sigterm_interrupts`` block, left or not)
    was stopped by a signal."""
    return _Stop.signum is not None


def raise_if_stop_asked() -> None:
    """KeyboardInterrupt if a stop was asked for: called before anything is published."""
    if _Stop.asked:
        raise KeyboardInterrupt


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """``sigterm_interrupts``' handler of both stops."""
    if _Stop.asked and _Stop.command and not _Stop.said:
        _Stop.said = True
        _say_second_stop(signum)
    _Stop.asked, _Stop.signum = True, signum
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts(*, command: bool = False) -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that
    ``finally`` clauses remove staging folders and stop processes; both are also noted
    (``stop_asked``), for an interrupt that a finalizer swallowed, with the signal
    (``stopped_exit_code``). The old handlers come back after. Off the main thread (where
    no handler can be set) nothing changes.

    A second stop, during the first one's clean-up, raises again: the clean-up is cut short
    where it stands (a browser drawing its last figures is killed). In a ``command``'s block
    (the command line's, around the whole command; blocks within it follow it) it also says
    so, once, on stderr (``second_stop_note``): it said nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    caught = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not if ignored
        caught.append(signal.SIGINT)
    if _Stop.depth == 0:  # a new command: the last one's stop is not its own
        _Stop.signum, _Stop.command = None, command
    previous = {sig: signal.signal(sig, _interrupt) for sig in caught}
    _Stop.depth += 1
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _Stop.depth -= 1
        if _Stop.depth == 0:
            _Stop.asked = _Stop.command = _Stop.said = False

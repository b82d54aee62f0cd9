"""When a launch's timed runs start and end, as its rank 0 tells its launcher, and the
launcher's go for each run after the first: the emulator plays a launch's
``network.schedule`` from 0 ms in every run (a timed forward of a ViT, a timed generation
of a decoder), as the twin plays it in each of its runs.

Rank 0 appends to ``FILE`` in the launch's folder (worker ``--timed-start``) one whole line
per event, ``K`` counting the launch's timed runs from 0 and ``T`` its
``time.monotonic()`` in seconds (every process of a machine, one in a Mininet host too,
reads the same clock): ``start K T`` as run K is about to start (its warm-ups done),
``end K T`` as it has ended, and ``ready K`` once it wants to start run K (K >= 1; for a
configuration's first run, before its warm-ups). Before each run after the first it waits
for the launcher's go, a line ``K`` in ``GO_FILE``: the launcher has stopped run K-1's
clock and put the links back at the launch's rate by then, outside the timed work. A rank
waits for a go until its launch's deadline at most.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FILE = "timed_start.txt"  # in the launch's folder (worker --timed-start)
GO_FILE = "timed_go.txt"  # beside it: the launcher's go for each run after the first
GO_POLL_S = 0.005  # how often a rank waiting for its go looks

EventKind = Literal["start", "end", "ready"]
KINDS: tuple[EventKind, ...] = ("start", "end", "ready")


@dataclass(frozen=True)
class Event:
    """One line of ``FILE``: run ``run``'s ``kind``, at ``at`` (``time.monotonic()`` s; None
    for ``ready``)."""

    kind: EventKind
    run: int
    at: float | None = None


class NoGo(RuntimeError):
    """The launcher gave no go for a run before the launch's deadline."""


class TimedRuns:
    """Rank 0's side: announce each timed run, wait for the launcher's go before the next
    (until ``deadline`` at most, a ``time.monotonic()`` instant: the launch's)."""

    def __init__(self, path: Path, deadline: float) -> None:
        self._path = path
        self._go = path.with_name(GO_FILE)
        self._deadline = deadline

    def wait_go(self, run: int) -> None:
        """Ask for run ``run``'s go (run 0 needs none) and wait for it; ``NoGo`` if the
        deadline passes first."""
        if run == 0:
            return
        self._append(f"ready {run}")
        while str(run) not in _whole_lines(self._go):
            if time.monotonic() > self._deadline:
                raise NoGo(f"no go for timed run {run} from the launcher ({self._go})")
            time.sleep(GO_POLL_S)

    def started(self, run: int) -> None:
        """Run ``run`` starts now."""
        self._append(f"start {run} {time.monotonic()!r}")

    def ended(self, run: int) -> None:
        """Run ``run`` has ended now."""
        self._append(f"end {run} {time.monotonic()!r}")

    def _append(self, line: str) -> None:
        with self._path.open("a") as out:
            out.write(line + "\n")


def events(path: Path) -> list[Event]:
    """The events rank 0 has written to ``path`` so far, whole lines only, in order."""
    return Tail(path).new()


class Tail:
    """``FILE`` as rank 0 appends to it: each ``new()`` reads only what was appended since
    the last, so a launcher may look every millisecond (a long launch's file holds three
    lines a run)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0  # bytes of whole lines read so far

    def new(self) -> list[Event]:
        """The events written since the last call, whole lines only, in order."""
        try:
            with self._path.open("rb") as file:
                file.seek(self._offset)
                text = file.read()
        except FileNotFoundError:
            return []
        whole = text[: text.rfind(b"\n") + 1]  # a line still being written is left out
        self._offset += len(whole)
        return [_event(self._path, line) for line in whole.decode().splitlines()]


def _event(path: Path, line: str) -> Event:
    word, run, *at = line.split()
    kind = next((kind for kind in KINDS if kind == word), None)
    if kind is None:
        raise ValueError(f"{path}: not an event: {line!r}")
    return Event(kind, int(run), float(at[0]) if at else None)


def ended_at(path: Path, run: int) -> float | None:
    """When run ``run`` ended, once rank 0 has said so in ``path`` (else None)."""
    return next((e.at for e in events(path) if e.kind == "end" and e.run == run), None)


def start_watch(path: Path, run: int) -> Callable[[], float | None]:
    """When run ``run`` started, once rank 0 has said so in ``path`` (else None); each call
    reads only what rank 0 appended since the last (``Tail``)."""
    tail = Tail(path)
    seen: list[float] = []

    def started_at() -> float | None:
        for event in [] if seen else tail.new():
            if event.kind == "start" and event.run == run and event.at is not None:
                seen.append(event.at)
        return seen[0] if seen else None

    return started_at


def give_go(path: Path, run: int) -> None:
    """The launcher: run ``run`` may start (``path``: rank 0's ``FILE``)."""
    with path.with_name(GO_FILE).open("a") as out:
        out.write(f"{run}\n")


def _whole_lines(path: Path) -> list[str]:
    """``path``'s lines that have ended (a line still being written is left out)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.splitlines()[: text.count("\n")]

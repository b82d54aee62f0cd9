"""A ViT or decoder launch's schedule played once per timed run, each from 0 ms, as the
twin plays it in each of its runs: a ``FaultClock`` per run, started at the instant rank 0
announces for the run's start (``emu.timed_start``; the clock looks for it every
millisecond) and ended at the end it announces, neither at the launcher's next look;
before the next run, outside the timed work, the links go back to the launch's rate, its
0 ms steps are applied again, and only then does rank 0 get its go."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from edgetwin.emu import timed_start
from edgetwin.emu.mininet.faults import Action, FaultClock, FaultRecord


class RunClocks:
    """Plays ``actions`` in every timed run of one launch (``label``: its name in
    ``faults.csv``, each run's row adding ``timed run K``) as rank 0 announces its runs in
    ``path``; ``apply`` does an action, ``restore`` puts every link back at the launch's
    rate. ``records`` and ``unplayed`` (one entry per run that started: the actions it
    ended before) grow as runs end."""

    def __init__(
        self,
        label: str,
        path: Path,
        actions: Sequence[Action],
        apply: Callable[[Action], None],
        restore: Callable[[], None],
    ) -> None:
        self._label = label
        self._path = path
        self._actions = actions
        self._apply = apply
        self._restore = restore
        self._events = timed_start.Tail(path)  # what rank 0 writes, as the looks read it
        self._clock: FaultClock | None = None  # the run's that is next or running
        self._stepped = False  # a step past 0 ms played since the links were last restored
        self.records: list[FaultRecord] = []
        self.unplayed: list[list[Action]] = []

    def begin(self) -> None:
        """Before the ranks start: run 0's 0 ms steps, so that it meets them from its first
        byte (its warm-ups too)."""
        self._next(0)

    def look(self) -> None:
        """Act on the events rank 0 has written since the last look (a run's start is its
        clock's to see)."""
        for event in self._events.new():
            if event.kind == "end":
                self._stop()
            elif event.kind == "ready":
                self._stop()  # none running: the previous run's ended, and was stopped
                if self._stepped:  # the links are off the launch's rate
                    self._restore()
                    self._stepped = False
                self._next(event.run)
                timed_start.give_go(self._path, event.run)

    def finish(self) -> None:
        """The launch has ended: stop a clock still running; every link back at the
        launch's rate if any action ran."""
        self._stop()
        if self.records:
            self._restore()

    def _next(self, run: int) -> None:
        """Run ``run``'s clock, its 0 ms steps applied, waiting for the run's start."""
        ended_at = partial(timed_start.ended_at, self._path, run)
        label = f"{self._label}, timed run {run}"
        self._clock = FaultClock(label, self._actions, self._apply, ended_at)
        self._clock.apply_rates_at_start()
        self._clock.start_when(timed_start.start_watch(self._path, run))

    def _stop(self) -> None:
        clock, self._clock = self._clock, None
        if clock is None:
            return
        records = clock.stop()
        self.records += records
        self._stepped |= any(record.at_s > 0 for record in [*records, *clock.late])
        if clock.started:
            self.unplayed.append(clock.unplayed())

"""Faults and bandwidth changes during a run: a timeline built from the scenario (pure),
played by a clock (a thread per thing its actions act on), recorded as ``faults.csv``.

Times count from the start of what runs: a CROWDio job's first event, each timed forward or
generation of a ViT or decoder launch (``emu.timed_start``, ``run_clocks``), its warm-ups
done.
A ``bandwidth`` step at 0 s is the rate the run meets from its first byte: a clock set
before the run (``apply_rates_at_start``) applies it at once; the rest play from ``start()``,
or, for a run whose start another process announces, from the instant it announces
(``start_when``).
``link_down`` takes a host's link down at the bridge (both directions) and up again
``for_s`` later (without ``for_s`` it stays down until the run ends); ``kill_worker``
SIGKILLs the worker process on a host; ``bandwidth`` is a ``network.schedule`` step
(every link, or the shared medium, to the new rate, ``tc class change``).
"""

from __future__ import annotations

import csv
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal

from edgetwin.emu.mininet.medium import rate_commands_of
from edgetwin.emu.mininet.topology import EmuTopology, TcCommand, link_state_command
from edgetwin.emulator_spec import Fault
from edgetwin.network_spec import NetworkSpec, did_not_play
from edgetwin.number_text import exact_text

ActionKind = Literal["link_down", "link_up", "kill_worker", "bandwidth"]
START_POLL_S = 0.001  # how often a clock waiting for its run's announced start looks
RunNoun = Literal["run", "job"]  # what a timeline plays in: a ViT's or decoder's timed run
_PLURAL: dict[RunNoun, str] = {"run": "runs", "job": "jobs"}  # (a forward, a generation), a job
_START: dict[RunNoun, str] = {  # where its times count from (as the twin says it of its runs)
    "run": "each run's start, its warm-ups left out",
    "job": "each job's start",
}


@dataclass(frozen=True)
class Action:
    """One thing to do ``at_s`` into a run: commands to run, or a host's worker to kill;
    ``for_good``: a link down that stays down until the run ends."""

    at_s: float
    kind: ActionKind
    host: int | None
    detail: str
    commands: tuple[TcCommand, ...] = ()
    for_good: bool = False


@dataclass(frozen=True)
class FaultRecord:
    """What was done, when (s from the run's start: planned, started, and applied: when
    its commands had all run), and its effect; a row of ``faults.csv``."""

    run: str
    kind: ActionKind
    host: int | None
    detail: str
    at_s: float
    started_s: float
    applied_s: float
    effect: str = ""


def timeline(
    topology: EmuTopology,
    network: NetworkSpec,
    faults: Sequence[Fault] = (),
) -> list[Action]:
    """The scenario's faults and bandwidth schedule as actions, in time order."""
    actions = [
        Action(
            step.at_ms / 1e3,
            "bandwidth",
            None,
            f"{exact_text(step.bandwidth_mbps)} Mbps",
            tuple(rate_commands_of(topology, network, step.bandwidth_mbps)),
        )
        for step in network.schedule
    ]
    for fault in faults:
        if fault.kind == "kill_worker":
            actions.append(Action(fault.at_s, "kill_worker", fault.host, "SIGKILL"))
            continue
        down = (link_state_command(topology, fault.host, up=False),)
        if fault.for_s is None:
            actions.append(Action(fault.at_s, "link_down", fault.host, "for good", down, True))
            continue
        up = (link_state_command(topology, fault.host, up=True),)
        actions.append(
            Action(fault.at_s, "link_down", fault.host, f"for {exact_text(fault.for_s)} s", down)
        )
        actions.append(Action(fault.at_s + fault.for_s, "link_up", fault.host, "", up))
    return sorted(actions, key=lambda action: action.at_s)


def target_of(action: Action) -> tuple[str, int | None]:
    """What ``action`` acts on: the rates (every ``bandwidth`` step), a host's link
    (``link_down``, ``link_up``) or a host's worker (``kill_worker``)."""
    if action.kind == "bandwidth":
        return ("rates", None)
    if action.kind == "kill_worker":
        return ("worker", action.host)
    return ("link", action.host)


class FaultClock:
    """Plays a timeline from ``start()``; ``stop()`` ends it and returns what ran.
    ``ended_at`` says when the run ended once that is known (a ``time.monotonic()``
    instant; a ViT's or decoder's rank 0 announces it): nothing starts after it, even
    before ``stop()`` comes.

    Each thing actions act on (``target_of``) has a thread of its own that plays its
    actions in time order, so actions due together start together and a slow one (a rate
    change runs tc on every link) delays only later ones on the same thing, never another
    host's fault. ``apply`` does one action (runs its commands, kills its worker), and may
    be called from several threads at once; an action that fails is recorded with its
    error as the effect, and the run goes on."""

    def __init__(
        self,
        run: str,
        actions: Sequence[Action],
        apply: Callable[[Action], None],
        ended_at: Callable[[], float | None] = lambda: None,
    ):
        self._run = run
        self._actions = list(actions)
        self._apply = apply
        self._ended_at = ended_at
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # the records and what played, written by every thread
        self._at_start: list[FaultRecord] = []  # apply_rates_at_start's
        self._records: dict[int, FaultRecord] = {}  # by the action's place in the timeline
        self._threads: list[threading.Thread] = []
        self._start: float | None = None  # time.monotonic() at start()
        self._started_at: Callable[[], float | None] = lambda: None  # start_when's
        self._watch: threading.Thread | None = None  # start_when's, until it starts the clock
        self.late: list[FaultRecord] = []  # after stop(): started after the run's end

    def apply_rates_at_start(self) -> None:
        """Apply now the ``bandwidth`` steps due at 0 s, before the run starts: a CROWDio
        job's foreman broadcasts its first stage as the job starts, and a clock started
        then set the rate while the blobs were already crossing the links at the old one.
        Rates, not link faults: a link down before the job would keep its worker out."""
        now = [a for a in self._actions if a.kind == "bandwidth" and a.at_s == 0]
        self._actions = [a for a in self._actions if a not in now]
        self._at_start += [self._do(action, 0.0) for action in now]

    @property
    def started(self) -> bool:
        return self._start is not None

    def start(self, at: float | None = None) -> None:
        """Play the timeline from ``at`` (a ``time.monotonic()`` instant, now if None);
        actions already due then start at once."""
        self._start = start = time.monotonic() if at is None else at
        by_target: dict[tuple[str, int | None], list[int]] = {}
        for index, action in enumerate(self._actions):
            by_target.setdefault(target_of(action), []).append(index)
        for target, indices in by_target.items():
            name = f"edgetwin-faults-{target[0]}-{target[1]}"
            play = (start, indices)
            thread = threading.Thread(target=self._play, args=play, name=name, daemon=True)
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()

    def start_when(self, started_at: Callable[[], float | None]) -> None:
        """Play the timeline from the instant ``started_at`` says once it says one (a
        ``time.monotonic()`` instant; a ViT's or decoder's rank 0 announces its run's
        start), asked every ``START_POLL_S`` from now: a step due a few ms into the run
        starts when due, not when the launcher next looks (every 50 ms). With nothing left
        to play it does not look: ``stop()`` asks once."""
        self._started_at = started_at
        if not self._actions:
            return
        self._watch = threading.Thread(
            target=self._await_start, name="edgetwin-faults-start", daemon=True
        )
        self._watch.start()

    def _await_start(self) -> None:
        while not self._stopped.wait(START_POLL_S):
            at = self._started_at()
            if at is not None:
                self.start(at)
                return

    def stop(self) -> list[FaultRecord]:
        """Stop playing (actions not due yet are dropped); the records of those that ran in
        the run, in timeline order. One started after the run's end (``ended_at``; a step
        the thread applied as rank 0 was writing its end) did not play in it: it goes to
        ``late`` and counts as unplayed."""
        self._stopped.set()
        if self._watch is not None:  # first: it may still be starting the clock's threads
            self._watch.join()
        for thread in self._threads:
            thread.join()
        if self._start is None:  # the run started and ended between two of its looks
            self._start = self._started_at()
        ended = self._ended_at()
        with self._lock:
            if ended is not None and self._start is not None:
                late = [i for i, r in self._records.items() if self._start + r.started_s >= ended]
                self.late = [self._records.pop(i) for i in sorted(late)]
            return [*self._at_start, *(self._records[i] for i in sorted(self._records))]

    def _play(self, start: float, indices: Sequence[int]) -> None:
        for index in indices:
            action = self._actions[index]
            if self._stopped.wait(max(start + action.at_s - time.monotonic(), 0.0)):
                return
            if self._ended_at() is not None:  # the run has ended, before its look stops us
                return
            record = self._do(action, time.monotonic() - start)
            with self._lock:
                self._records[index] = record

    def unplayed(self) -> list[Action]:
        """After ``stop()``: the actions the run ended before (a link's return left out:
        every link is up again after a run)."""
        with self._lock:
            return [
                action
                for index, action in enumerate(self._actions)
                if index not in self._records and action.kind != "link_up"
            ]

    def _do(self, action: Action, started_s: float) -> FaultRecord:
        """Apply ``action`` and record it: ``started_s`` as given, ``applied_s`` as it
        returned (both 0 before ``start()``)."""
        effect = ""
        try:
            self._apply(action)
        except Exception as exc:  # recorded, not raised: a fault must not stop the run
            effect = f"failed: {exc}"
        applied_s = 0.0 if self._start is None else time.monotonic() - self._start
        return FaultRecord(
            self._run, action.kind, action.host, action.detail, action.at_s, started_s,
            applied_s, effect,
        )  # fmt: skip


def unplayed_warnings(per_run: Sequence[Sequence[Action]], noun: RunNoun) -> list[str]:
    """A warning per fault or schedule step that some runs (a ViT's or decoder's timed
    ``run``, a CROWDio ``job``) ended before, from each run's ``FaultClock.unplayed``
    (``per_run``, one entry per run, as the twin's ``sim.network.unplayed_schedule``): they
    wrote nothing."""
    counts = Counter(action for actions in per_run for action in actions)
    runs = len(per_run)
    warnings = []
    for action in sorted(counts, key=lambda a: a.at_s):
        what = (
            f"network.schedule step to {action.detail}"
            if action.kind == "bandwidth"
            else f"emulator.faults {action.kind} on host {action.host}"
        )
        start = _START[noun]
        warnings.append(did_not_play(what, action.at_s, counts[action], runs, _PLURAL[noun], start))
    return warnings


def write_faults(path: Path, records: Sequence[FaultRecord]) -> None:
    """``faults.csv``: one row per action applied."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in fields(FaultRecord)])
        writer.writeheader()
        for record in records:
            writer.writerow(asdict(record))

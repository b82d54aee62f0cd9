"""Faults and bandwidth changes during a run: a timeline built from the scenario (pure),
played by a clock thread, recorded as ``faults.csv``.

Times count from the start of what runs: a CROWDio job's first event, a ViT launch.
A ``bandwidth`` step at 0 s is the rate the run meets from its first byte: a clock set
before the run (``apply_rates_at_start``) applies it at once; the rest play from ``start()``.
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

ActionKind = Literal["link_down", "link_up", "kill_worker", "bandwidth"]
RunNoun = Literal["launch", "job"]  # what a timeline plays in: a ViT launch, a CROWDio job
_PLURAL: dict[RunNoun, str] = {"launch": "launches", "job": "jobs"}


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
    """What was done, when (planned and applied, s from the run's start), and its effect;
    a row of ``faults.csv``."""

    run: str
    kind: ActionKind
    host: int | None
    detail: str
    at_s: float
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
            f"{step.bandwidth_mbps:g} Mbps",
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
        actions.append(Action(fault.at_s, "link_down", fault.host, f"for {fault.for_s:g} s", down))
        actions.append(Action(fault.at_s + fault.for_s, "link_up", fault.host, "", up))
    return sorted(actions, key=lambda action: action.at_s)


class FaultClock:
    """Plays a timeline in a thread from ``start()``; ``stop()`` ends it and returns what ran.

    ``apply`` does one action (runs its commands, kills its worker); an action that fails
    is recorded with its error as the effect, and the run goes on."""

    def __init__(self, run: str, actions: Sequence[Action], apply: Callable[[Action], None]):
        self._run = run
        self._actions = list(actions)
        self._apply = apply
        self._stopped = threading.Event()
        self._records: list[FaultRecord] = []
        self._thread = threading.Thread(target=self._play, name="edgetwin-faults", daemon=True)
        self._start = 0.0
        self._played = 0  # of the actions, in time order

    def apply_rates_at_start(self) -> None:
        """Apply now the ``bandwidth`` steps due at 0 s, before the run starts: a CROWDio
        job's foreman broadcasts its first stage as the job starts, and a clock started
        then set the rate while the blobs were already crossing the links at the old one.
        Rates, not link faults: a link down before the job would keep its worker out."""
        now = [a for a in self._actions if a.kind == "bandwidth" and a.at_s == 0]
        self._actions = [a for a in self._actions if a not in now]
        for action in now:
            self._do(action, 0.0)

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        self._start = time.monotonic()
        self._thread.start()

    def stop(self) -> list[FaultRecord]:
        """Stop playing (actions not due yet are dropped); the records of those that ran."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        return list(self._records)

    def _play(self) -> None:
        for action in self._actions:
            if self._stopped.wait(max(self._start + action.at_s - time.monotonic(), 0.0)):
                return
            self._do(action, time.monotonic() - self._start)
            self._played += 1

    def unplayed(self) -> list[Action]:
        """After ``stop()``: the actions the run ended before (a link's return left out:
        every link is up again after a run)."""
        return [a for a in self._actions[self._played :] if a.kind != "link_up"]

    def _do(self, action: Action, applied_s: float) -> None:
        effect = ""
        try:
            self._apply(action)
        except Exception as exc:  # recorded, not raised: a fault must not stop the run
            effect = f"failed: {exc}"
        record = FaultRecord(
            self._run, action.kind, action.host, action.detail, action.at_s, applied_s, effect
        )
        self._records.append(record)


def unplayed_warnings(per_run: Sequence[Sequence[Action]], noun: RunNoun) -> list[str]:
    """A warning per fault or schedule step that some runs (a ViT ``launch``, a CROWDio
    ``job``) ended before, from each run's ``FaultClock.unplayed`` (``per_run``, one entry
    per run, as the twin's ``sim.network.unplayed_schedule``): they wrote nothing."""
    counts = Counter(action for actions in per_run for action in actions)
    runs = len(per_run)
    warnings = []
    for action in sorted(counts, key=lambda a: a.at_s):
        what = (
            f"network.schedule step to {action.detail}"
            if action.kind == "bandwidth"
            else f"emulator.faults {action.kind} on host {action.host}"
        )
        start = f"each {noun}'s start"
        warnings.append(did_not_play(what, action.at_s, counts[action], runs, _PLURAL[noun], start))
    return warnings


def write_faults(path: Path, records: Sequence[FaultRecord]) -> None:
    """``faults.csv``: one row per action applied."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in fields(FaultRecord)])
        writer.writeheader()
        for record in records:
            writer.writerow(asdict(record))

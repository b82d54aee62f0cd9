"""Plain records of a crowd run, for tests, traces and report figures.

The twin only writes records; ``edgetwin/reports`` (or any consumer) turns
them into figures: a Gantt per phone from ``Activity``, RAM and battery over
time from ``RamSample`` and ``BatterySample``, latency per job from the rows.
Times are in seconds of simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

ACTIVITY_KINDS = ("load", "infer", "transfer", "idle", "away")
TIMELINE_FILE = "timeline.json"  # a traced crowd run's records (``run --trace``)


@dataclass(frozen=True)
class TraceEvent:
    """One thing that happened: ``event`` on ``phone`` ("foreman" for the foreman)."""

    t_s: float
    phone: str
    event: str
    job: int | None = None
    item: int | None = None
    stage: str | None = None


@dataclass(frozen=True)
class Activity:
    """A stretch of a phone's time: load, infer, transfer, idle or away."""

    phone: str
    kind: str
    start_s: float
    end_s: float
    job: int | None = None
    item: int | None = None
    stage: str | None = None
    detail: str = ""
    cut: bool = False  # still going when the run ended: its end is the run's


@dataclass(frozen=True)
class RamSample:
    """The RAM the sessions on ``phone`` hold from ``t_s`` on (MB): its session RAM, what a
    job's ``peak_session_mb`` is the largest of (not a process's RSS)."""

    phone: str
    t_s: float
    session_mb: float


@dataclass(frozen=True)
class BatterySample:
    """Battery level of ``phone`` at ``t_s``."""

    phone: str
    t_s: float
    level_pct: float


@dataclass
class Recorder:
    """Collects records when ``enabled``; every method is a no-op otherwise."""

    env: simpy.Environment
    enabled: bool = False
    events: list[TraceEvent] = field(default_factory=list)
    activities: list[Activity] = field(default_factory=list)
    ram: list[RamSample] = field(default_factory=list)
    battery: list[BatterySample] = field(default_factory=list)
    # (phone, kind) -> (start_ms, job, item, stage, detail) of each stretch begun, not ended
    open: dict[tuple[str, str], tuple[float, int | None, int | None, str | None, str]] = field(
        default_factory=dict
    )

    def event(
        self,
        phone: str,
        event: str,
        job: int | None = None,
        item: int | None = None,
        stage: str | None = None,
    ) -> None:
        if self.enabled:
            self.events.append(TraceEvent(self.env.now / 1e3, phone, event, job, item, stage))

    def begin(
        self,
        phone: str,
        kind: str,
        job: int | None = None,
        item: int | None = None,
        stage: str | None = None,
        detail: str = "",
    ) -> None:
        """A stretch of ``kind`` on ``phone`` starts now (a phone does one of a kind at a
        time); ``end`` records it."""
        if self.enabled:
            self.open[(phone, kind)] = (self.env.now, job, item, stage, detail)

    def end(self, phone: str, kind: str, cut: bool = False) -> None:
        """The stretch ``begin`` started, from then to now (none of no time); ``cut``: the
        run ended it."""
        opened = self.open.pop((phone, kind), None) if self.enabled else None
        if opened is not None and self.env.now > opened[0]:
            start_ms, job, item, stage, detail = opened
            start_s, end_s = start_ms / 1e3, self.env.now / 1e3
            self.activities.append(
                Activity(phone, kind, start_s, end_s, job, item, stage, detail, cut)
            )

    def end_all(self) -> None:
        """Every stretch still going at the end of the run, to now, marked ``cut``: a load,
        transfer or inference that the horizon cut, a phone away (they were left out, and
        the Gantt drew the phone idle)."""
        for phone, kind in list(self.open):
            self.end(phone, kind, cut=True)

    def session_ram(self, phone: str, session_mb: float) -> None:
        if self.enabled:
            self.ram.append(RamSample(phone, self.env.now / 1e3, session_mb))

    def level(self, phone: str, level_pct: float) -> None:
        if self.enabled:
            self.battery.append(BatterySample(phone, self.env.now / 1e3, level_pct))


def with_idle(activities: list[Activity], phones: list[str], end_s: float) -> list[Activity]:
    """Activities per phone in time order, the gaps between them filled with ``idle``."""
    by_phone: dict[str, list[Activity]] = {phone: [] for phone in phones}
    for activity in activities:
        by_phone[activity.phone].append(activity)
    filled: list[Activity] = []
    for phone in phones:
        cursor = 0.0
        for activity in sorted(by_phone[phone], key=lambda a: (a.start_s, a.end_s)):
            if activity.start_s > cursor:
                filled.append(Activity(phone, "idle", cursor, activity.start_s))
            filled.append(activity)
            cursor = max(cursor, activity.end_s)
        if end_s > cursor:
            filled.append(Activity(phone, "idle", cursor, end_s))
    return filled

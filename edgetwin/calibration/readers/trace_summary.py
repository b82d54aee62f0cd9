"""Milliseconds per phase and per op of a classified profiler trace.

Times are interval unions, so nested or overlapping events (an op and the ops it
calls, two threads waiting at once) are counted once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from edgetwin.calibration.readers.chrome_trace import ChromeTrace, EventKind, Phase, TraceEvent


@dataclass(frozen=True)
class PhaseTime:
    """Time covered by the events of one phase: host threads, GPU streams, either."""

    phase: Phase
    wall_ms: float
    host_ms: float
    device_ms: float


@dataclass(frozen=True)
class OpTotal:
    """One event name (of one kind and phase) over the whole trace.

    ``host_ms``: time covered by its host-side occurrences; ``device_ms``: by its GPU
    occurrences, or, for a host op, by the GPU work launched from inside it.
    """

    name: str
    kind: EventKind
    phase: Phase
    count: int
    host_ms: float
    device_ms: float


@dataclass(frozen=True)
class TraceSummary:
    """Per-phase and per-op times of one trace; ``ops`` sorted by host + device time."""

    span_ms: float
    busy_ms: float
    kernel_ms: float
    memcpy_ms: float
    phases: tuple[PhaseTime, ...]
    ops: tuple[OpTotal, ...]

    def phase(self, phase: Phase) -> PhaseTime:
        return next(p for p in self.phases if p.phase is phase)


OpKey = tuple[str, EventKind, Phase]


def union_ms(intervals_us: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals given in µs, in ms."""
    total_us = 0.0
    current: tuple[float, float] | None = None
    for start, end in sorted(intervals_us):
        if current is None or start > current[1]:
            if current is not None:
                total_us += current[1] - current[0]
            current = (start, end)
        elif end > current[1]:
            current = (current[0], end)
    if current is not None:
        total_us += current[1] - current[0]
    return total_us / 1000.0


def summarize_trace(trace: ChromeTrace) -> TraceSummary:
    """Phase times, kernel and memcpy time, and per-op totals of a trace."""
    events = trace.events

    def span(selected: Iterable[TraceEvent]) -> float:
        return union_ms((e.start_us, e.end_us) for e in selected)

    phases = tuple(
        PhaseTime(
            phase=phase,
            wall_ms=span(e for e in events if e.phase is phase),
            host_ms=span(e for e in events if e.phase is phase and not e.kind.on_device),
            device_ms=span(e for e in events if e.phase is phase and e.kind.on_device),
        )
        for phase in Phase
    )
    return TraceSummary(
        span_ms=(max(e.end_us for e in events) - min(e.start_us for e in events)) / 1000.0,
        busy_ms=span(events),
        kernel_ms=span(e for e in events if e.kind is EventKind.KERNEL),
        memcpy_ms=span(e for e in events if e.kind is EventKind.MEMCPY),
        phases=phases,
        ops=_op_totals(events),
    )


def _op_totals(events: tuple[TraceEvent, ...]) -> tuple[OpTotal, ...]:
    own: dict[OpKey, list[int]] = defaultdict(list)
    launched: dict[OpKey, set[int]] = defaultdict(set)
    for index, event in enumerate(events):
        key = (event.name, event.kind, event.phase)
        own[key].append(index)
        if event.kind.on_device:
            launched[key].add(index)
        node = event.launcher
        while node is not None:
            caller = events[node]
            launched[(caller.name, caller.kind, caller.phase)].add(index)
            node = caller.parent
    totals = []
    for key, indices in own.items():
        name, kind, phase = key
        host = [] if kind.on_device else indices
        totals.append(
            OpTotal(
                name=name,
                kind=kind,
                phase=phase,
                count=len(indices),
                host_ms=union_ms((events[i].start_us, events[i].end_us) for i in host),
                device_ms=union_ms((events[i].start_us, events[i].end_us) for i in launched[key]),
            )
        )
    return tuple(sorted(totals, key=lambda t: (-(t.host_ms + t.device_ms), t.name)))

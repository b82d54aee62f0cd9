"""Replayable availability: phones leave and come back at times read from a CSV file.

The file has a header ``device,t_leave_s,t_return_s`` and one row per
absence; an empty ``t_return_s`` means the phone does not come back. A
phone's absences must not overlap. Renewal processes (``availability`` of a
phone class) use ``Device.availability`` instead.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import simpy

from edgetwin.csv_rows import Row, read_rows
from edgetwin.errors import InputError
from edgetwin.number_text import exact_text
from edgetwin.sim.device import Device

COLUMNS = ("device", "t_leave_s", "t_return_s")


@dataclass(frozen=True)
class Absence:
    leave_ms: float
    return_ms: float | None  # None: gone for good


def read_trace(path: Path, phones: set[str]) -> dict[str, list[Absence]]:
    """Absences per phone, in time order; every problem names the file, the column and the
    line. ``path`` is a regular file: the scenario's field that names it is checked first."""
    absences: dict[str, list[tuple[Absence, int]]] = {}
    for row in read_rows(path, COLUMNS, rows_needed=False):
        name, absence = _absence(row, phones)
        absences.setdefault(name, []).append((absence, row.line))
    for name, items in absences.items():
        items.sort(key=lambda item: item[0].leave_ms)
        for (before, before_line), (after, line) in pairwise(items):
            if before.return_ms is None or before.return_ms > after.leave_ms:
                problem = (
                    f"line {line}: this absence of {name!r} overlaps the one on line {before_line}"
                )
                raise InputError(path, "t_leave_s", problem)
    return {name: [absence for absence, _ in items] for name, items in absences.items()}


def _absence(row: Row, phones: set[str]) -> tuple[str, Absence]:
    """The phone a row names and its absence."""
    name = row.text("device")
    if name not in phones:
        raise row.error("device", f"unknown device {name!r}")
    leave_s = row.number("t_leave_s", minimum=0)
    return_s = row.optional_number("t_return_s")
    if return_s is not None and return_s <= leave_s:
        raise row.error(
            "t_return_s", f"{exact_text(return_s)} is not after t_leave_s ({exact_text(leave_s)})"
        )
    return name, Absence(leave_s * 1e3, None if return_s is None else return_s * 1e3)


def replay(
    env: simpy.Environment, device: Device, absences: list[Absence]
) -> Generator[simpy.Event, object, None]:
    """Take ``device`` away and back at the trace's times."""
    for absence in absences:
        yield env.timeout(max(0.0, absence.leave_ms - env.now))
        device.leave("availability trace")
        if absence.return_ms is None:
            return
        yield env.timeout(absence.return_ms - env.now)
        device.rejoin()

"""Replayable availability: phones leave and come back at times read from a CSV file.

The file has a header ``device,t_leave_s,t_return_s`` and one row per
absence; an empty ``t_return_s`` means the phone does not come back. A
phone's absences must not overlap. Renewal processes (``availability`` of a
phone class) use ``Device.availability`` instead.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Generator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import simpy

from edgetwin.errors import InputError
from edgetwin.provenance import note_read
from edgetwin.sim.device import Device

COLUMNS = ("device", "t_leave_s", "t_return_s")


@dataclass(frozen=True)
class Absence:
    leave_ms: float
    return_ms: float | None  # None: gone for good


def read_trace(path: Path, phones: set[str]) -> dict[str, list[Absence]]:
    """Absences per phone, in time order; every problem names the file and the line.
    ``path`` is a regular file: the scenario's field that names it is checked first."""
    note_read(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # a BOM is no column
            reader = csv.reader(handle)
            header = next(reader, None)
            rows = [(reader.line_num, fields) for fields in reader if fields]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    if header is None or set(COLUMNS) - set(header):  # an empty file has no header either
        raise InputError(path, "line 1", f"expected the columns {', '.join(COLUMNS)}")
    absences: dict[str, list[tuple[Absence, int]]] = {}
    for line, fields in rows:
        if len(fields) != len(header):
            problem = f"{len(fields)} fields, the header has {len(header)}"
            raise InputError(path, f"line {line}", problem)
        row = dict(zip(header, fields, strict=True))
        absence = _absence(path, line, row, phones)
        absences.setdefault(row["device"].strip(), []).append((absence, line))
    for name, items in absences.items():
        items.sort(key=lambda item: item[0].leave_ms)
        for (before, before_line), (after, line) in pairwise(items):
            if before.return_ms is None or before.return_ms > after.leave_ms:
                problem = f"this absence of {name!r} overlaps the one on line {before_line}"
                raise InputError(path, f"line {line}", problem)
    return {name: [absence for absence, _ in items] for name, items in absences.items()}


def _absence(path: Path, line: int, row: dict[str, str], phones: set[str]) -> Absence:
    where = f"line {line}"
    name = (row.get("device") or "").strip()
    if name not in phones:
        raise InputError(path, where, f"unknown device {name!r}")
    try:
        leave_s = float(row["t_leave_s"])
        back = (row.get("t_return_s") or "").strip()
        return_s = float(back) if back else None
    except (TypeError, ValueError):
        raise InputError(path, where, "t_leave_s and t_return_s must be numbers") from None
    if not math.isfinite(leave_s) or leave_s < 0:
        raise InputError(path, where, "t_leave_s must be a finite time >= 0")
    if return_s is not None and not (math.isfinite(return_s) and return_s > leave_s):
        raise InputError(path, where, "t_return_s must be after t_leave_s")
    return Absence(leave_s * 1e3, None if return_s is None else return_s * 1e3)


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

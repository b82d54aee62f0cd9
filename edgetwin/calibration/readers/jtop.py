"""Jetson ``jtop`` CSV logs (jetson-stats: a csv.DictWriter of ``jtop.stats``).

Accepted columns:

- ``time``: the sample's wall-clock time as jtop writes it (``2025-03-01 12:00:00.25``,
  any ISO 8601 form) or plain seconds; samples are returned with ``t_s`` counted from
  the first one.
- power, in mW, converted to W; the first of these present is used:
  ``Power TOT`` (jetson-stats 4.x, total of the rails), ``Power VDD_IN`` (the module's
  input rail on Orin boards), ``power cur`` (jetson-stats 2.x/3.x).
- ``phase`` (optional, added by an experimenter): label of what ran.

All other columns (CPU loads, temperatures, other ``Power <rail>`` columns, ``uptime``,
``nvp model``, ...) are ignored.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from edgetwin.calibration.readers.power import PowerSample, check_time_order
from edgetwin.csv_rows import Row, read_header, read_rows
from edgetwin.errors import InputError, shown

TIME_COLUMN = "time"
POWER_COLUMNS_MW = ("Power TOT", "Power VDD_IN", "power cur")


def jtop_power_column(header: list[str]) -> str | None:
    """The power column a jtop log with this header is read from, if any."""
    return next((c for c in POWER_COLUMNS_MW if c in header), None)


def read_jtop_power(path: str | Path) -> list[PowerSample]:
    """Power samples (W) of a jtop CSV log."""
    path = Path(path)
    power_column = jtop_power_column(read_header(path))
    if power_column is None:
        expected = ", ".join(POWER_COLUMNS_MW)
        raise InputError(path, None, f"line 1: no power column (one of {expected})")
    samples: list[PowerSample] = []
    start_s: float | None = None
    for row in read_rows(path, (TIME_COLUMN, power_column), optional=("phase",)):
        clock_s = _clock_s(row)
        start_s = clock_s if start_s is None else start_s
        sample = PowerSample(
            t_s=clock_s - start_s,
            power_w=row.number(power_column, minimum=0.0) / 1000.0,
            phase=row.optional_text("phase"),
        )
        check_time_order(row, TIME_COLUMN, samples, sample.t_s)
        samples.append(sample)
    return samples


def _clock_s(row: Row) -> float:
    text = row.text(TIME_COLUMN)
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            problem = f"{shown(text)} is neither a date-time nor seconds"
            raise row.error(TIME_COLUMN, problem) from None
        return (moment - datetime(1970, 1, 1, tzinfo=moment.tzinfo)).total_seconds()
    if not math.isfinite(seconds):
        raise row.error(TIME_COLUMN, f"{shown(text)} is not a finite time")
    return seconds

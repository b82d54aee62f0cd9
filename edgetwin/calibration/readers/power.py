"""Power samples: the record shared by power logs, and NVML ``power_samples.csv``.

``power_samples.csv`` columns: t_s (seconds from the start of the log, never going
back), phase (label of what ran, e.g. ``vit_b8``, ``gloo``, ``idle``), power_w (board
power) and, optionally, sm_clock_mhz.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgetwin.csv_rows import Row, read_rows
from edgetwin.errors import InputError
from edgetwin.number_text import exact_text

NVML_POWER_FILE = "power_samples.csv"
NVML_COLUMNS = ("t_s", "phase", "power_w")


@dataclass(frozen=True)
class PowerSample:
    """Power at time ``t_s``; ``phase`` labels what ran (None when the log has no labels)."""

    t_s: float
    power_w: float
    phase: str | None = None
    sm_clock_mhz: float | None = None


def read_nvml_power(path: str | Path) -> list[PowerSample]:
    """Samples of an NVML ``power_samples.csv``."""
    path = Path(path)
    samples: list[PowerSample] = []
    for row in read_rows(path, NVML_COLUMNS, optional=("sm_clock_mhz",)):
        sample = PowerSample(
            t_s=row.number("t_s"),
            power_w=row.number("power_w", minimum=0.0),
            phase=row.text("phase"),
            sm_clock_mhz=row.optional_number("sm_clock_mhz", minimum=0.0),
        )
        check_time_order(row, "t_s", samples, sample.t_s)
        samples.append(sample)
    return samples


def check_time_order(row: Row, column: str, earlier: list[PowerSample], t_s: float) -> None:
    """A sample may not be older than the one before it."""
    if earlier and t_s < earlier[-1].t_s:
        raise InputError(
            row.path,
            column,
            f"line {row.line}: time goes back ({exact_text(t_s)} s after "
            f"{exact_text(earlier[-1].t_s)} s)",
        )

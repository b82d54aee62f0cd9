"""Facts of the machine edgetwin runs on that several layers read (a rank's threads, a
calibration's load)."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0))


def load_average_1min() -> float:
    """The machine's one-minute load average: runnable processes, on every core."""
    return os.getloadavg()[0]

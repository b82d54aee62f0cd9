"""The worker's telemetry: a simulated battery, its RSS and session memory, and its log in the
Android trace format.

The battery drains by a per-state power model: ``load`` (blob written, session
built), ``compute`` (decode, inference, encode), ``transmit`` (receiving a model
blob, sending a result) and ``idle`` for the rest of the worker's wall time.

The log is the CROWDio worker log that ``edgetwin.calibration.readers.android``
reads: one row per event (``load_cold``, ``load_warm``, ``infer``, ``transfer``,
``unload``), times in seconds on the worker's clock (0 at start), ``battery_mah``
the remaining charge. Rows are flushed as they are written, so a killed worker
leaves a readable log.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal

import psutil

from edgetwin.profile import LI_ION_NOMINAL_V, mah_from_joules
from edgetwin.worker_log import COLUMNS as LOG_COLUMNS
from edgetwin.worker_log import Event as LogEvent

State = Literal["load", "compute", "transmit"]


@dataclass(frozen=True)
class PowerModel:
    """Power per state and the battery (phone-class defaults, not fitted to a device)."""

    idle_w: float = 0.3
    load_w: float = 2.0
    compute_w: float = 3.5
    transmit_w: float = 1.2
    voltage_v: float = LI_ION_NOMINAL_V
    capacity_mah: float = 4000.0

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):
            value = getattr(self, name)
            if not 0 <= value < math.inf:  # NaN fails this too
                raise ValueError(f"{name} must be a finite number of at least 0, not {value}")
        for name in ("voltage_v", "capacity_mah"):  # divisors
            if getattr(self, name) == 0:
                raise ValueError(f"{name} must be greater than 0")

    @classmethod
    def parse(cls, text: str) -> PowerModel:
        """Overrides as ``name=value`` pairs separated by commas, e.g. ``compute_w=2.5``
        (ValueError names a field that is unknown or out of range)."""
        known = {f.name for f in fields(cls)}
        values: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, value = item.partition("=")
            if name not in known:
                raise ValueError(
                    f"unknown power-model field {name!r}; known: {', '.join(sorted(known))}"
                )
            values[name] = float(value)
        return replace(cls(), **values)

    def watts(self, state: State) -> float:
        return {"load": self.load_w, "compute": self.compute_w, "transmit": self.transmit_w}[state]


class BatteryMeter:
    """Charge drained by the power model since the meter started."""

    def __init__(self, power: PowerModel, clock: Callable[[], float] = time.monotonic) -> None:
        self.power = power
        self.clock = clock
        self.start_s = clock()
        self.busy_s: dict[State, float] = {"load": 0.0, "compute": 0.0, "transmit": 0.0}

    def spend(self, state: State, seconds: float) -> None:
        """Charge ``seconds`` spent in ``state`` (the rest of the wall time is idle)."""
        self.busy_s[state] += seconds

    def drained_j(self) -> float:
        idle_s = max(self.clock() - self.start_s - sum(self.busy_s.values()), 0.0)
        busy_j = sum(self.power.watts(state) * s for state, s in self.busy_s.items())
        return self.power.idle_w * idle_s + busy_j

    def drained_mah(self) -> float:
        return mah_from_joules(self.drained_j(), self.power.voltage_v)

    def remaining_mah(self) -> float:
        return max(self.power.capacity_mah - self.drained_mah(), 0.0)

    def pct(self) -> float:
        return 100.0 * self.remaining_mah() / self.power.capacity_mah


def rss_mb() -> float:
    """This process's resident set size (MB)."""
    return float(psutil.Process().memory_info().rss) / 2**20


class SessionMemory:
    """What a worker's sessions and their work add to its memory: its RSS above what it held
    at the start, before any session (``baseline_mb``: the interpreter and its libraries),
    at its peak since the previous reading. The peak is the kernel's high-water mark of the
    RSS (``VmHWM`` in ``proc/status``), started again from the RSS at each reading (``5`` to
    ``proc/clear_refs``), so that a session's creation counts though its buffers are freed
    before the worker replies; where ``proc`` cannot tell it (no ``/proc``), the RSS at the
    reading."""

    def __init__(self, proc: Path = Path("/proc/self")) -> None:
        self.proc = proc
        self.baseline_mb = rss_mb()
        self._high_water_mb()  # the mark starts from here

    def peak_mb(self) -> float:
        """The peak above the baseline since the previous reading (MB)."""
        peak_mb = self._high_water_mb()
        return max((rss_mb() if peak_mb is None else peak_mb) - self.baseline_mb, 0.0)

    def held_mb(self) -> float:
        """The RSS above the baseline now (MB); the peak is left alone."""
        return max(rss_mb() - self.baseline_mb, 0.0)

    def _high_water_mb(self) -> float | None:
        """The RSS's high-water mark (MB), then reset to the RSS now; None where unknown."""
        try:
            with (self.proc / "status").open(encoding="ascii") as status:
                kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
            (self.proc / "clear_refs").write_text("5", encoding="ascii")
        except (OSError, StopIteration):  # no /proc, or a status without the mark
            return None
        return kib / 2**10


class WorkerLog:
    """Appends rows to a worker log, flushing each one."""

    def __init__(self, path: Path, worker_id: str, meter: BatteryMeter) -> None:
        self.worker_id = worker_id
        self.meter = meter
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._handle, lineterminator="\n")
        self._writer.writerow(LOG_COLUMNS)
        self._handle.flush()

    def write(
        self,
        event: LogEvent,
        job_id: str,
        stage: str,
        start_s: float,
        end_s: float,
        *,
        task: str | None = None,
        input_index: int | None = None,
        size_bytes: int | None = None,
    ) -> None:
        """One event; ``start_s``/``end_s`` on the meter's clock (made relative here)."""
        self._writer.writerow(
            [
                self.worker_id,
                task or "",
                job_id,
                "" if input_index is None else input_index,
                stage,
                event,
                f"{start_s - self.meter.start_s:.6f}",
                f"{end_s - self.meter.start_s:.6f}",
                f"{rss_mb():.2f}",
                f"{self.meter.pct():.3f}",
                f"{self.meter.remaining_mah():.6f}",
                "" if size_bytes is None else size_bytes,
            ]
        )
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()

"""Energy from power samples: trapezoid integration over time, per window or phase label.

Power is taken as linear between consecutive samples. For energy per phase, the time
between two samples with different labels is split at its midpoint: each sample's label
owns the time closer to it, so the phases add up to the whole log's energy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from edgetwin.calibration.readers.power import PowerSample
from edgetwin.number_text import exact_text


@dataclass(frozen=True)
class PhaseEnergy:
    """Energy and time attributed to one phase label (all its stretches together)."""

    phase: str | None
    duration_s: float
    energy_j: float

    @property
    def mean_power_w(self) -> float:
        return self.energy_j / self.duration_s if self.duration_s > 0 else 0.0


def energy_j(
    samples: Sequence[PowerSample], start_s: float | None = None, end_s: float | None = None
) -> float:
    """Energy over [start_s, end_s] (default: the whole log), power interpolated at the ends."""
    times_s, powers_w = _arrays(samples)
    lo = times_s[0] if start_s is None else start_s
    hi = times_s[-1] if end_s is None else end_s
    if not times_s[0] <= lo <= hi <= times_s[-1]:
        raise ValueError(
            f"window [{exact_text(lo)}, {exact_text(hi)}] s is not inside the samples' "
            f"[{exact_text(times_s[0])}, "
            f"{exact_text(times_s[-1])}] s"
        )
    inside = (times_s > lo) & (times_s < hi)
    t = np.concatenate(([lo], times_s[inside], [hi]))
    p = np.interp(t, times_s, powers_w)
    return float(np.sum((p[1:] + p[:-1]) / 2.0 * np.diff(t)))


def energy_by_phase(samples: Sequence[PowerSample]) -> list[PhaseEnergy]:
    """Energy per phase label, in order of first appearance."""
    _arrays(samples)
    duration: dict[str | None, float] = {}
    energy: dict[str | None, float] = {}
    for a, b in pairwise(samples):
        dt = b.t_s - a.t_s
        if a.phase == b.phase:
            parts = [(a.phase, dt, (a.power_w + b.power_w) / 2.0 * dt)]
        else:
            mid_w = (a.power_w + b.power_w) / 2.0
            parts = [
                (a.phase, dt / 2.0, (a.power_w + mid_w) / 2.0 * dt / 2.0),
                (b.phase, dt / 2.0, (mid_w + b.power_w) / 2.0 * dt / 2.0),
            ]
        for phase, seconds, joules in parts:
            duration[phase] = duration.get(phase, 0.0) + seconds
            energy[phase] = energy.get(phase, 0.0) + joules
    return [PhaseEnergy(phase, duration[phase], energy[phase]) for phase in duration]


def _arrays(samples: Sequence[PowerSample]) -> tuple[np.ndarray, np.ndarray]:
    if len(samples) < 2:
        raise ValueError("energy needs at least two power samples")
    times_s = np.array([s.t_s for s in samples])
    if np.any(np.diff(times_s) < 0):
        raise ValueError("power samples must be in time order")
    return times_s, np.array([s.power_w for s in samples])

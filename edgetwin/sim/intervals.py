"""Prediction intervals on twin rows (docs/calibration.md, "Prediction intervals").

Three sources of error, each from data:

- parameter uncertainty: the row's configuration rerun under every bootstrap variant of
  the fleet's profiles (same seed, so the same jitter and availability);
- the model's own error and run-to-run noise: the split-conformal quantile ``q`` of the
  |log(measured / predicted)| residuals the calibration kept from its leave-one-out fits
  (``fit.held_out`` of the profile), measured repetition by repetition;
- combined as the envelope of the conformal band around each bootstrap prediction:
  ``[min_b m_b / e^q, max_b m_b x e^q]``.

A metric with no held-out residuals (a vendor figure, a power model no data held out, a
hand-written profile) gets the band ``[m / NOT_KNOWN_FACTOR, m x NOT_KNOWN_FACTOR]`` and is
named in the row's ``interval_not_known``. ``total_ms`` without residuals of its own is
the sum of its components' bands (their errors taken as fully correlated), or not known
when one of them is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from edgetwin.profile import DeviceProfile
from edgetwin.results import INTERVAL_METRICS, LATENCY_PARTS, ResultRow

# a metric the twin has no held-out evidence for: it knows the order of magnitude only
NOT_KNOWN_FACTOR = 10.0
# the profile section each metric's residuals describe (a profile fitted on a base takes
# the base's residuals for the sections it does not fit)
SECTION_OF_METRIC = {
    "compute_ms": "compute",
    "staging_ms": "staging",
    "comm_ms": "network",
    "energy_j": "power",
}
# too few residuals for the conformal rank ceil((n + 1) L): a Student-t bound needs two
MIN_RESIDUALS = 2


def log_half_width(log_residuals: Sequence[float], level: float) -> float | None:
    """The half width ``q`` of the log band at ``level``; None when there are too few.

    Split conformal: the ceil((n + 1) L)-th smallest |residual|. When that rank exceeds n
    (fewer than L / (1 - L) residuals), the Student-t prediction bound of zero-mean normal
    log errors, ``t((1 + L) / 2, n) x rms``.
    """
    n = len(log_residuals)
    if n < MIN_RESIDUALS:
        return None
    magnitudes = sorted(abs(r) for r in log_residuals)
    rank = math.ceil((n + 1) * level)
    if rank <= n:
        return magnitudes[rank - 1]
    from scipy.stats import t  # deferred: workers import the twin's package, not SciPy

    rms = math.sqrt(sum(r * r for r in log_residuals) / n)
    return float(t.ppf((1 + level) / 2, n)) * rms


def held_out_residuals(profile: DeviceProfile, metric: str) -> list[float]:
    """Every held-out log residual the profile's calibration kept for ``metric``."""
    groups: Mapping[str, Sequence[float]] = (
        profile.fit.get("held_out", {}).get("log_residuals", {}).get(metric, {})
    )
    return [float(r) for residuals in groups.values() for r in residuals]


def fleet_half_widths(
    profiles: Sequence[DeviceProfile], level: float, decoder: bool
) -> dict[str, float | None]:
    """Per metric, the widest ``q`` over the fleet's profiles (None: some profile does not
    know). A decoder's compute is memory traffic, which no held-out data covers."""
    widths: dict[str, float | None] = {}
    for metric in INTERVAL_METRICS:
        per_profile = [log_half_width(held_out_residuals(p, metric), level) for p in profiles]
        unknown = decoder and metric in ("compute_ms", "total_ms")
        known = [q for q in per_profile if q is not None]
        widths[metric] = None if unknown or len(known) < len(per_profile) else max(known)
    return widths


def with_intervals(
    row: ResultRow, variants: Sequence[ResultRow], widths: Mapping[str, float | None]
) -> ResultRow:
    """``row`` with ``<metric>_lo/_hi`` from its bootstrap ``variants`` and the half widths;
    a failed row (no values) is returned unchanged."""
    if not row.ok:
        return row
    bands: dict[str, tuple[float, float]] = {}
    not_known: list[str] = []
    for metric in sorted(INTERVAL_METRICS, key=lambda m: m == "total_ms"):  # total last
        value = getattr(row, metric)
        if value is None or math.isnan(value):
            continue
        values = [value] + [getattr(v, metric) for v in variants if v.ok]
        q = widths[metric]
        known_parts = all(c in bands and c not in not_known for c in LATENCY_PARTS)
        if metric == "total_ms" and q is None and known_parts:
            below = sum(getattr(row, c) - bands[c][0] for c in LATENCY_PARTS)
            above = sum(bands[c][1] - getattr(row, c) for c in LATENCY_PARTS)
            bands[metric] = (value - below, value + above)
        elif value == 0:  # nothing of it happens (one device stages nothing)
            bands[metric] = (0.0, 0.0)
            if q is None:  # ... or a profile that cannot tell (powers of 0: no meter)
                not_known.append(metric)
        elif q is None:
            bands[metric] = (min(values) / NOT_KNOWN_FACTOR, max(values) * NOT_KNOWN_FACTOR)
            not_known.append(metric)
        else:
            bands[metric] = (min(values) * math.exp(-q), max(values) * math.exp(q))
    columns: dict[str, Any] = {
        f"{m}_{end}": band[i] for m, band in bands.items() for i, end in enumerate(("lo", "hi"))
    }
    columns["interval_not_known"] = ";".join(not_known) or None
    return replace(row, **columns)


def not_known_intervals(row: ResultRow) -> ResultRow:
    """A row whose every metric is not known (no profile residuals, no bootstrap): the wide
    band, every metric named."""
    return with_intervals(row, (), dict.fromkeys(INTERVAL_METRICS))

"""Interpolation along a bandwidth axis: in 1 / bandwidth, not in bandwidth.

A transfer takes a fixed time (latency, per-message costs) plus its bits over the
rate, so a configuration's latency or energy between two swept bandwidths goes as
a + b / bandwidth: a straight line in 1 / bandwidth, a convex curve in bandwidth.
A straight line in bandwidth between the two overestimates it (and places a
crossover with one device too high); in 1 / bandwidth the line is that curve.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def along_bandwidth(
    bandwidth_mbps: float, grid_mbps: Sequence[float], values: Sequence[float]
) -> float:
    """``values`` (at the increasing ``grid_mbps``) at ``bandwidth_mbps``: linear in
    1 / bandwidth between grid points, clamped to the nearest edge outside them."""
    inverse = 1.0 / np.asarray(grid_mbps, dtype=float)[::-1]  # increasing, as np.interp needs
    return float(np.interp(1.0 / bandwidth_mbps, inverse, np.asarray(values, dtype=float)[::-1]))


def zero_crossing_mbps(low_mbps: float, high_mbps: float, at_low: float, at_high: float) -> float:
    """Where a difference that is ``at_low`` at ``low_mbps`` and ``at_high`` (of the other
    sign) at ``high_mbps`` is 0, linear in 1 / bandwidth between them."""
    share = at_low / (at_low - at_high)
    inverse = 1.0 / low_mbps + (1.0 / high_mbps - 1.0 / low_mbps) * share
    return 1.0 / inverse
